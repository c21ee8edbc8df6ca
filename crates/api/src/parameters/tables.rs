//! The per-engine tables. Only settings every supported release of the engine knows
//! are listed: a server refuses to start on an unknown one.

use super::Setting;
use super::Takes::{Reload, Restart};

const fn reload(name: &'static str) -> Setting {
    Setting {
        name,
        takes: Reload,
    }
}

const fn restart(name: &'static str) -> Setting {
    Setting {
        name,
        takes: Restart,
    }
}

/// postgres 13 to 18; `Restart` is the `postmaster` context.
pub const POSTGRES: &[Setting] = &[
    restart("shared_buffers"),
    restart("max_connections"),
    restart("max_worker_processes"),
    restart("max_locks_per_transaction"),
    restart("max_pred_locks_per_transaction"),
    restart("max_prepared_transactions"),
    restart("superuser_reserved_connections"),
    restart("huge_pages"),
    restart("shared_preload_libraries"),
    restart("wal_buffers"),
    restart("autovacuum_max_workers"),
    restart("autovacuum_freeze_max_age"),
    restart("track_activity_query_size"),
    restart("track_commit_timestamp"),
    restart("max_files_per_process"),
    reload("work_mem"),
    reload("maintenance_work_mem"),
    reload("autovacuum_work_mem"),
    reload("hash_mem_multiplier"),
    reload("temp_file_limit"),
    reload("effective_cache_size"),
    reload("random_page_cost"),
    reload("seq_page_cost"),
    reload("effective_io_concurrency"),
    reload("maintenance_io_concurrency"),
    reload("default_statistics_target"),
    reload("max_parallel_workers"),
    reload("max_parallel_workers_per_gather"),
    reload("max_parallel_maintenance_workers"),
    reload("parallel_setup_cost"),
    reload("parallel_tuple_cost"),
    reload("jit"),
    reload("checkpoint_timeout"),
    reload("checkpoint_completion_target"),
    reload("max_wal_size"),
    reload("min_wal_size"),
    reload("wal_compression"),
    reload("wal_writer_delay"),
    reload("commit_delay"),
    reload("bgwriter_delay"),
    reload("bgwriter_lru_maxpages"),
    reload("bgwriter_lru_multiplier"),
    reload("autovacuum"),
    reload("autovacuum_naptime"),
    reload("autovacuum_vacuum_threshold"),
    reload("autovacuum_analyze_threshold"),
    reload("autovacuum_vacuum_scale_factor"),
    reload("autovacuum_analyze_scale_factor"),
    reload("autovacuum_vacuum_cost_delay"),
    reload("autovacuum_vacuum_cost_limit"),
    reload("vacuum_cost_delay"),
    reload("vacuum_cost_limit"),
    reload("statement_timeout"),
    reload("lock_timeout"),
    reload("idle_in_transaction_session_timeout"),
    reload("deadlock_timeout"),
    reload("default_transaction_isolation"),
    reload("timezone"),
    reload("log_timezone"),
    reload("datestyle"),
    reload("log_min_duration_statement"),
    reload("log_min_messages"),
    reload("log_min_error_statement"),
    reload("log_statement"),
    reload("log_line_prefix"),
    reload("log_connections"),
    reload("log_disconnections"),
    reload("log_lock_waits"),
    reload("log_temp_files"),
    reload("log_checkpoints"),
    reload("log_autovacuum_min_duration"),
    reload("track_io_timing"),
    reload("track_functions"),
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
    restart("innodb_buffer_pool_instances"),
    restart("innodb_flush_method"),
    restart("innodb_read_io_threads"),
    restart("innodb_write_io_threads"),
    restart("performance_schema"),
    restart("back_log"),
    restart("open_files_limit"),
    reload("max_connections"),
    reload("max_connect_errors"),
    reload("innodb_buffer_pool_size"),
    reload("innodb_log_buffer_size"),
    reload("innodb_flush_log_at_trx_commit"),
    reload("sync_binlog"),
    reload("binlog_expire_logs_seconds"),
    reload("innodb_io_capacity"),
    reload("innodb_io_capacity_max"),
    reload("innodb_lock_wait_timeout"),
    reload("innodb_print_all_deadlocks"),
    reload("innodb_adaptive_hash_index"),
    reload("innodb_max_dirty_pages_pct"),
    reload("innodb_thread_concurrency"),
    reload("table_open_cache"),
    reload("table_definition_cache"),
    reload("thread_cache_size"),
    reload("tmp_table_size"),
    reload("max_heap_table_size"),
    reload("sort_buffer_size"),
    reload("join_buffer_size"),
    reload("read_buffer_size"),
    reload("read_rnd_buffer_size"),
    reload("max_allowed_packet"),
    reload("max_execution_time"),
    reload("max_prepared_stmt_count"),
    reload("wait_timeout"),
    reload("interactive_timeout"),
    reload("net_read_timeout"),
    reload("net_write_timeout"),
    reload("lock_wait_timeout"),
    reload("long_query_time"),
    reload("slow_query_log"),
    reload("log_queries_not_using_indexes"),
    reload("log_error_verbosity"),
    reload("character_set_server"),
    reload("collation_server"),
    reload("sql_mode"),
    reload("transaction_isolation"),
    reload("event_scheduler"),
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
    restart("storage.wiredTiger.engineConfig.cacheSizeGB"),
    restart("storage.wiredTiger.engineConfig.journalCompressor"),
    restart("storage.wiredTiger.collectionConfig.blockCompressor"),
    restart("net.maxIncomingConnections"),
    restart("net.compression.compressors"),
    restart("operationProfiling.mode"),
    restart("operationProfiling.slowOpThresholdMs"),
    restart("operationProfiling.slowOpSampleRate"),
    reload("setParameter.cursorTimeoutMillis"),
    reload("setParameter.transactionLifetimeLimitSeconds"),
    reload("setParameter.maxTransactionLockRequestTimeoutMillis"),
    reload("setParameter.ttlMonitorEnabled"),
    reload("setParameter.logLevel"),
    reload("setParameter.notablescan"),
    reload("setParameter.diagnosticDataCollectionEnabled"),
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
