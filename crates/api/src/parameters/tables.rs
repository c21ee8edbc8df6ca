//! The per-engine tables. Only settings every supported release of the engine knows
//! are listed: a server refuses to start on an unknown one.

use super::Takes::{Reload, Restart};
use super::{Kind, Setting};

const INT: Kind = Kind::Integer;
const REAL: Kind = Kind::Real;
const TEXT: Kind = Kind::Text;
const BOOL: Kind = Kind::Choice(&["on", "off", "true", "false", "yes", "no", "1", "0"]);
const MYSQL_BOOL: Kind = Kind::Choice(&["ON", "OFF", "1", "0", "TRUE", "FALSE"]);
const MONGO_BOOL: Kind = Kind::Choice(&["true", "false"]);
/// postgres memory: a number of the setting's unit or with `B`, `kB`, `MB`, `GB`, `TB`.
const BYTES: Kind = Kind::Unit(&["B", "kB", "MB", "GB", "TB"]);
/// postgres time: a number of the setting's unit or with `us`, `ms`, `s`, `min`, `h`, `d`.
const DURATION: Kind = Kind::Unit(&["us", "ms", "s", "min", "h", "d"]);
/// mysql sizes: a number of bytes or with `K`, `M`, `G`, `T`.
const MYSQL_BYTES: Kind = Kind::Unit(&["K", "M", "G", "T", "k", "m", "g", "t"]);

const fn reload(name: &'static str, kind: Kind) -> Setting {
    Setting {
        name,
        takes: Reload,
        kind,
    }
}

const fn restart(name: &'static str, kind: Kind) -> Setting {
    Setting {
        name,
        takes: Restart,
        kind,
    }
}

/// postgres 13 to 18; `Restart` is the `postmaster` context.
pub const POSTGRES: &[Setting] = &[
    restart("shared_buffers", BYTES),
    restart("max_connections", INT),
    restart("max_worker_processes", INT),
    restart("max_locks_per_transaction", INT),
    restart("max_pred_locks_per_transaction", INT),
    restart("max_prepared_transactions", INT),
    restart("superuser_reserved_connections", INT),
    restart("huge_pages", Kind::Choice(&["on", "off", "try"])),
    restart("shared_preload_libraries", TEXT),
    restart("wal_buffers", BYTES),
    restart("autovacuum_max_workers", INT),
    restart("autovacuum_freeze_max_age", INT),
    restart("track_activity_query_size", BYTES),
    restart("track_commit_timestamp", BOOL),
    restart("max_files_per_process", INT),
    reload("work_mem", BYTES),
    reload("maintenance_work_mem", BYTES),
    reload("autovacuum_work_mem", BYTES),
    reload("hash_mem_multiplier", REAL),
    reload("temp_file_limit", BYTES),
    reload("effective_cache_size", BYTES),
    reload("random_page_cost", REAL),
    reload("seq_page_cost", REAL),
    reload("effective_io_concurrency", INT),
    reload("maintenance_io_concurrency", INT),
    reload("default_statistics_target", INT),
    reload("max_parallel_workers", INT),
    reload("max_parallel_workers_per_gather", INT),
    reload("max_parallel_maintenance_workers", INT),
    reload("parallel_setup_cost", REAL),
    reload("parallel_tuple_cost", REAL),
    reload("jit", BOOL),
    reload("checkpoint_timeout", DURATION),
    reload("checkpoint_completion_target", REAL),
    reload("max_wal_size", BYTES),
    reload("min_wal_size", BYTES),
    reload("wal_compression", TEXT),
    reload("wal_writer_delay", DURATION),
    reload("commit_delay", INT),
    reload("bgwriter_delay", DURATION),
    reload("bgwriter_lru_maxpages", INT),
    reload("bgwriter_lru_multiplier", REAL),
    reload("autovacuum", BOOL),
    reload("autovacuum_naptime", DURATION),
    reload("autovacuum_vacuum_threshold", INT),
    reload("autovacuum_analyze_threshold", INT),
    reload("autovacuum_vacuum_scale_factor", REAL),
    reload("autovacuum_analyze_scale_factor", REAL),
    reload("autovacuum_vacuum_cost_delay", DURATION),
    reload("autovacuum_vacuum_cost_limit", INT),
    reload("vacuum_cost_delay", DURATION),
    reload("vacuum_cost_limit", INT),
    reload("statement_timeout", DURATION),
    reload("lock_timeout", DURATION),
    reload("idle_in_transaction_session_timeout", DURATION),
    reload("deadlock_timeout", DURATION),
    reload(
        "default_transaction_isolation",
        Kind::Choice(&[
            "serializable",
            "repeatable read",
            "read committed",
            "read uncommitted",
        ]),
    ),
    reload("timezone", TEXT),
    reload("log_timezone", TEXT),
    reload("datestyle", TEXT),
    reload("log_min_duration_statement", DURATION),
    reload(
        "log_min_messages",
        Kind::Choice(&[
            "debug5", "debug4", "debug3", "debug2", "debug1", "info", "notice", "warning", "error",
            "log", "fatal", "panic",
        ]),
    ),
    reload(
        "log_min_error_statement",
        Kind::Choice(&[
            "debug5", "debug4", "debug3", "debug2", "debug1", "info", "notice", "warning", "error",
            "log", "fatal", "panic",
        ]),
    ),
    reload(
        "log_statement",
        Kind::Choice(&["none", "ddl", "mod", "all"]),
    ),
    reload("log_line_prefix", TEXT),
    reload("log_connections", TEXT),
    reload("log_disconnections", BOOL),
    reload("log_lock_waits", BOOL),
    reload("log_temp_files", BYTES),
    reload("log_checkpoints", BOOL),
    reload("log_autovacuum_min_duration", DURATION),
    reload("track_io_timing", BOOL),
    reload("track_functions", Kind::Choice(&["none", "pl", "all"])),
];

/// What the operator sets on postgres, and why.
pub const POSTGRES_OWNED: &[(&str, &str)] = &[
    ("port", "the Services and probes use 5432"),
    (
        "listen_addresses",
        "the Services reach the server on every address",
    ),
    (
        "data_directory",
        "the data directory follows the volume and the version",
    ),
    ("config_file", "the operator renders the configuration file"),
    ("hba_file", "client authentication is set up by the image"),
    ("ident_file", "client authentication is set up by the image"),
    (
        "external_pid_file",
        "the image runs the server in the foreground",
    ),
    (
        "unix_socket_*",
        "the probes and the operator connect through the socket",
    ),
    ("ssl*", "TLS is set up by the operator"),
    (
        "password_encryption",
        "the operator's users use scram-sha-256",
    ),
    ("wal_level", "replication needs it"),
    ("max_wal_senders", "replication sets it"),
    ("max_replication_slots", "replication sets it"),
    ("wal_keep_size", "replication sets it"),
    (
        "wal_log_hints",
        "replication needs it to rewind a former primary",
    ),
    ("hot_standby*", "replication sets it"),
    ("primary_*", "replication sets it"),
    ("synchronous_*", "spec.replication.mode sets it"),
    ("archive_*", "backups set it"),
    ("restore_command", "backups set it"),
    ("recovery_*", "replication and restore set it"),
    ("promote_trigger_file", "failover sets it"),
    (
        "default_transaction_read_only",
        "an upgrade holds writes with it",
    ),
    ("fsync", "turning it off loses data in a crash"),
    ("full_page_writes", "turning it off loses data in a crash"),
];

/// mysql 8.0, 8.4 and 9; `Reload` is a dynamic system variable, set with `SET GLOBAL`.
pub const MYSQL: &[Setting] = &[
    restart("innodb_buffer_pool_instances", INT),
    restart(
        "innodb_flush_method",
        Kind::Choice(&[
            "fsync",
            "O_DSYNC",
            "littlesync",
            "nosync",
            "O_DIRECT",
            "O_DIRECT_NO_FSYNC",
        ]),
    ),
    restart("innodb_read_io_threads", INT),
    restart("innodb_write_io_threads", INT),
    restart("performance_schema", MYSQL_BOOL),
    restart("back_log", INT),
    restart("open_files_limit", INT),
    reload("max_connections", INT),
    reload("max_connect_errors", INT),
    reload("innodb_buffer_pool_size", MYSQL_BYTES),
    reload("innodb_log_buffer_size", MYSQL_BYTES),
    reload(
        "innodb_flush_log_at_trx_commit",
        Kind::Choice(&["0", "1", "2"]),
    ),
    reload("sync_binlog", INT),
    reload("binlog_expire_logs_seconds", INT),
    reload("innodb_io_capacity", INT),
    reload("innodb_io_capacity_max", INT),
    reload("innodb_lock_wait_timeout", INT),
    reload("innodb_print_all_deadlocks", MYSQL_BOOL),
    reload("innodb_adaptive_hash_index", MYSQL_BOOL),
    reload("innodb_max_dirty_pages_pct", REAL),
    reload("innodb_thread_concurrency", INT),
    reload("table_open_cache", INT),
    reload("table_definition_cache", INT),
    reload("thread_cache_size", INT),
    reload("tmp_table_size", MYSQL_BYTES),
    reload("max_heap_table_size", MYSQL_BYTES),
    reload("sort_buffer_size", MYSQL_BYTES),
    reload("join_buffer_size", MYSQL_BYTES),
    reload("read_buffer_size", MYSQL_BYTES),
    reload("read_rnd_buffer_size", MYSQL_BYTES),
    reload("max_allowed_packet", MYSQL_BYTES),
    reload("max_execution_time", INT),
    reload("max_prepared_stmt_count", INT),
    reload("wait_timeout", INT),
    reload("interactive_timeout", INT),
    reload("net_read_timeout", INT),
    reload("net_write_timeout", INT),
    reload("lock_wait_timeout", INT),
    reload("long_query_time", REAL),
    reload("slow_query_log", MYSQL_BOOL),
    reload("log_queries_not_using_indexes", MYSQL_BOOL),
    reload("log_error_verbosity", Kind::Choice(&["1", "2", "3"])),
    reload("character_set_server", TEXT),
    reload("collation_server", TEXT),
    reload("sql_mode", TEXT),
    reload(
        "transaction_isolation",
        Kind::Choice(&[
            "READ-UNCOMMITTED",
            "READ-COMMITTED",
            "REPEATABLE-READ",
            "SERIALIZABLE",
        ]),
    ),
    reload("event_scheduler", Kind::Choice(&["ON", "OFF", "DISABLED"])),
];

/// What the operator sets on mysql, and why.
pub const MYSQL_OWNED: &[(&str, &str)] = &[
    ("port", "the Services and probes use 3306"),
    (
        "bind_address",
        "the Services reach the server on every address",
    ),
    (
        "skip_networking",
        "the Services reach the server over the network",
    ),
    (
        "socket",
        "the probes and the operator connect through the socket",
    ),
    ("datadir", "the data directory follows the volume"),
    (
        "innodb_data_home_dir",
        "the data directory follows the volume",
    ),
    (
        "innodb_log_group_home_dir",
        "the data directory follows the volume",
    ),
    (
        "innodb_undo_directory",
        "the data directory follows the volume",
    ),
    (
        "tmpdir",
        "the root filesystem is read-only; /tmp is the scratch volume",
    ),
    ("pid_file", "the image sets it"),
    ("user", "the server runs as the image's mysql user"),
    ("secure_file_priv", "the image sets it"),
    ("init_file", "the operator creates the users"),
    ("skip_grant_tables", "it turns authentication off"),
    (
        "default_authentication_plugin",
        "the operator's users need it",
    ),
    ("authentication_policy", "the operator's users need it"),
    ("ssl*", "TLS is set up by the operator"),
    ("tls*", "TLS is set up by the operator"),
    ("require_secure_transport", "TLS is set up by the operator"),
    ("server_id", "replication sets it"),
    ("gtid_mode", "replication needs it"),
    ("enforce_gtid_consistency", "replication needs it"),
    ("log_bin*", "replication needs the binary log"),
    ("binlog_format", "replication needs it"),
    ("log_replica_updates", "replication needs it"),
    ("log_slave_updates", "replication needs it"),
    ("relay_log*", "replication sets it"),
    ("report_*", "replication sets it"),
    ("replicate_*", "replication sets it"),
    ("rpl_*", "spec.replication.mode sets it"),
    ("read_only", "replication sets it"),
    ("super_read_only", "replication sets it"),
    (
        "plugin_load*",
        "spec.replication.mode loads the plugins it needs",
    ),
    (
        "lower_case_table_names",
        "it is fixed when the data directory is initialised",
    ),
    (
        "innodb_page_size",
        "it is fixed when the data directory is initialised",
    ),
];

/// mongodb 6.0 to 8.0, as `mongod.conf` paths; `Reload` is a parameter set with
/// `setParameter` on the running server.
pub const MONGODB: &[Setting] = &[
    restart("storage.wiredTiger.engineConfig.cacheSizeGB", REAL),
    restart(
        "storage.wiredTiger.engineConfig.journalCompressor",
        Kind::Choice(&["none", "snappy", "zlib", "zstd"]),
    ),
    restart(
        "storage.wiredTiger.collectionConfig.blockCompressor",
        Kind::Choice(&["none", "snappy", "zlib", "zstd"]),
    ),
    restart("net.maxIncomingConnections", INT),
    restart("net.compression.compressors", TEXT),
    restart(
        "operationProfiling.mode",
        Kind::Choice(&["off", "slowOp", "all"]),
    ),
    restart("operationProfiling.slowOpThresholdMs", INT),
    restart("operationProfiling.slowOpSampleRate", REAL),
    reload("setParameter.cursorTimeoutMillis", INT),
    reload("setParameter.transactionLifetimeLimitSeconds", INT),
    reload("setParameter.maxTransactionLockRequestTimeoutMillis", INT),
    reload("setParameter.ttlMonitorEnabled", MONGO_BOOL),
    reload("setParameter.logLevel", INT),
    reload("setParameter.notablescan", MONGO_BOOL),
    reload("setParameter.diagnosticDataCollectionEnabled", MONGO_BOOL),
];

/// What the operator sets on mongodb, and why.
pub const MONGODB_OWNED: &[(&str, &str)] = &[
    ("net.port", "the Services and probes use 27017"),
    (
        "net.bindIp*",
        "the Services reach the server on every address",
    ),
    ("net.tls*", "TLS is set up by the operator"),
    ("net.ssl*", "TLS is set up by the operator"),
    ("storage.dbPath", "the data directory follows the volume"),
    (
        "storage.directoryPerDB",
        "it is fixed when the data directory is initialised",
    ),
    ("replication.*", "replication sets it"),
    (
        "security.*",
        "authentication and the replica set's key are set up by the operator",
    ),
    ("sharding.*", "the operator runs replica sets, not shards"),
    (
        "processManagement.*",
        "the image runs the server in the foreground",
    ),
    (
        "systemLog.destination",
        "the server logs to the container's output",
    ),
    (
        "systemLog.path",
        "the server logs to the container's output",
    ),
    (
        "setParameter.authenticationMechanisms",
        "the operator's users need SCRAM",
    ),
    (
        "setParameter.enableLocalhostAuthBypass",
        "it turns authentication off",
    ),
];
