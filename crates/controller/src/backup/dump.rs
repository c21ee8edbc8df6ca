//! Each engine's own dump and restore commands, as the shell scripts a backup or
//! restore Job's engine container runs. They connect as the application user, with the
//! connection Secret's keys in their environment, and hold the application database:
//! its schema and rows (for mysql, its routines, events and triggers too); roles and
//! other databases are not in a dump.
//!
//! The dump goes into the named pipe [`PIPE`], which the backup agent beside it reads;
//! its exit status goes to [`STATUS`] and its errors to [`STATUS`]`.err`, so the agent
//! keeps the dump only when it succeeded.

use database_api::Engine;

/// The folder the engine container and the agent share.
pub const STREAM_DIR: &str = "/stream";
/// The named pipe the dump flows through.
pub const PIPE: &str = "/stream/dump";
/// Where the dump command's exit status goes.
pub const STATUS: &str = "/stream/status";

/// The key suffix of a dump of `engine`.
pub fn extension(engine: Engine) -> &'static str {
    match engine {
        Engine::Postgres | Engine::Mysql => "sql.gz",
        Engine::Mongodb => "archive.gz",
    }
}

/// The command that writes the dump into [`PIPE`], then its status into [`STATUS`].
pub fn dump_script(engine: Engine) -> String {
    let command = match engine {
        // Objects restore owned by the application user, and grants to roles the
        // dump does not hold are left out, so a restore needs no other role.
        Engine::Postgres => {
            r#"PGPASSWORD="$DATABASE_PASSWORD" pg_dump --host="$DATABASE_HOST" --port="$DATABASE_PORT" --username="$DATABASE_USERNAME" --dbname="$DATABASE_DATABASE" --no-password --no-owner --no-privileges"#
        }
        // One consistent snapshot without locking writers; transaction ids are not
        // carried over, so the restored Database starts a history of its own.
        Engine::Mysql => {
            r#"MYSQL_PWD="$DATABASE_PASSWORD" mysqldump --host="$DATABASE_HOST" --port="$DATABASE_PORT" --user="$DATABASE_USERNAME" --single-transaction --routines --events --triggers --hex-blob --no-tablespaces --set-gtid-purged=OFF "$DATABASE_DATABASE""#
        }
        Engine::Mongodb => r#"mongodump --uri="$DATABASE_URI" --db="$DATABASE_DATABASE" --archive"#,
    };
    format!("{command} > {PIPE} 2> {STATUS}.err\necho $? > {STATUS}")
}

/// The command that reads the dump from [`PIPE`] into the new Database; a failure
/// ends it with the tool's own error on its output (the container's termination
/// message).
pub fn restore_script(engine: Engine) -> String {
    match engine {
        // One transaction: a restore that fails leaves the database as empty as it was.
        Engine::Postgres => format!(
            r#"PGPASSWORD="$DATABASE_PASSWORD" exec psql --host="$DATABASE_HOST" --port="$DATABASE_PORT" --username="$DATABASE_USERNAME" --dbname="$DATABASE_DATABASE" --no-password --no-psqlrc --quiet --single-transaction --set=ON_ERROR_STOP=1 --file={PIPE} --output=/dev/null"#
        ),
        Engine::Mysql => format!(
            r#"MYSQL_PWD="$DATABASE_PASSWORD" exec mysql --host="$DATABASE_HOST" --port="$DATABASE_PORT" --user="$DATABASE_USERNAME" "$DATABASE_DATABASE" < {PIPE}"#
        ),
        Engine::Mongodb => format!(r#"exec mongorestore --uri="$DATABASE_URI" --archive={PIPE}"#),
    }
}

/// The connection Secret's keys the scripts read, each as `DATABASE_<KEY>`.
pub const CONNECTION_KEYS: [&str; 6] = ["host", "port", "username", "password", "database", "uri"];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_dump_reports_its_status_after_its_output() {
        for engine in Engine::ALL {
            let script = dump_script(engine);
            let (dump, status) = script.split_once('\n').expect("two lines");
            assert!(
                dump.contains(&format!("> {PIPE} 2> {STATUS}.err")),
                "{script}"
            );
            assert_eq!(status, format!("echo $? > {STATUS}"));
        }
    }

    #[test]
    fn dumps_and_restores_use_the_application_user_and_never_a_literal_password() {
        for engine in Engine::ALL {
            for script in [dump_script(engine), restore_script(engine)] {
                assert!(
                    script.contains("$DATABASE_PASSWORD") || script.contains("$DATABASE_URI"),
                    "{script}"
                );
                assert!(
                    !script.contains("root") && !script.contains("postgres "),
                    "{script}"
                );
            }
        }
    }

    #[test]
    fn a_postgres_restore_is_all_or_nothing() {
        let script = restore_script(Engine::Postgres);
        assert!(script.contains("--single-transaction") && script.contains("ON_ERROR_STOP=1"));
    }

    #[test]
    fn every_variable_a_script_reads_comes_from_the_connection_secret() {
        let known: Vec<String> = CONNECTION_KEYS
            .iter()
            .map(|k| format!("$DATABASE_{}", k.to_uppercase()))
            .collect();
        for engine in Engine::ALL {
            for script in [dump_script(engine), restore_script(engine)] {
                for (index, _) in script.match_indices("$DATABASE_") {
                    let name: String = script[index..]
                        .chars()
                        .skip(1)
                        .take_while(|c| c.is_ascii_uppercase() || *c == '_')
                        .collect();
                    assert!(known.contains(&format!("${name}")), "{name} in {script}");
                }
            }
        }
    }
}
