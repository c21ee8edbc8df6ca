//! Engine settings a user may give in `spec.parameters`: which are allowed for each
//! engine, which the operator owns (and so refuses), and whether a change takes a
//! restart or is applied to the running server.
//!
//! The tables list the settings people tune; anything else is refused by name, so a
//! typo is an error rather than a server that will not start.

mod tables;

use crate::Engine;

/// How a changed setting reaches a running server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Takes {
    /// Applied to the running server: postgres reloads its configuration, mysql sets the
    /// global variable, mongodb sets the parameter.
    Reload,
    /// Read only at start: the instances restart one at a time.
    Restart,
}

/// One setting a user may give.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Setting {
    pub name: &'static str,
    pub takes: Takes,
    pub kind: Kind,
}

/// The values a setting takes, checked at admission: a server given a value it cannot
/// parse refuses to start, and a restart would take the database down.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A whole number, possibly negative.
    Integer,
    /// A number, possibly with a fraction.
    Real,
    /// A whole number, alone or followed by one of these units.
    Unit(&'static [&'static str]),
    /// One of these words (postgres compares them without case).
    Choice(&'static [&'static str]),
    /// Any one line.
    Text,
}

impl Kind {
    /// What is wrong with `value` for this kind, as the rest of a sentence.
    pub fn problem(self, value: &str) -> Option<String> {
        let value = value.trim();
        let integer = |v: &str| {
            let digits = v.strip_prefix('-').unwrap_or(v);
            !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
        };
        match self {
            Kind::Integer if integer(value) => None,
            Kind::Integer => Some("must be a whole number".to_owned()),
            Kind::Real if value.parse::<f64>().is_ok_and(f64::is_finite) => None,
            Kind::Real => Some("must be a number".to_owned()),
            Kind::Unit(units) => {
                let split = value
                    .find(|c: char| !(c.is_ascii_digit() || c == '-'))
                    .unwrap_or(value.len());
                let (number, unit) = value.split_at(split);
                (!(integer(number) && (unit.is_empty() || units.contains(&unit.trim())))).then(
                    || {
                        format!(
                            "must be a whole number, alone or followed by one of {}",
                            units.join(", ")
                        )
                    },
                )
            }
            Kind::Choice(words) if words.iter().any(|w| w.eq_ignore_ascii_case(value)) => None,
            Kind::Choice(words) => Some(format!("must be one of {}", words.join(", "))),
            Kind::Text => None,
        }
    }
}

/// Why a name is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The operator sets it; the reason says what for.
    Owned(&'static str),
    /// Not in the engine's table.
    Unknown,
}

/// The settings `engine` accepts, in the table's order.
pub fn allowed(engine: Engine) -> &'static [Setting] {
    match engine {
        Engine::Postgres => tables::POSTGRES,
        Engine::Mysql => tables::MYSQL,
        Engine::Mongodb => tables::MONGODB,
    }
}

/// The name as the engine's table spells it: mysql treats `-` and `_` alike.
pub fn canonical(engine: Engine, name: &str) -> String {
    match engine {
        Engine::Mysql => name.replace('-', "_"),
        Engine::Postgres | Engine::Mongodb => name.to_owned(),
    }
}

/// How `name` takes effect on `engine`, or why it is refused.
pub fn lookup(engine: Engine, name: &str) -> Result<Takes, Refusal> {
    setting(engine, name).map(|s| s.takes)
}

/// The table's entry for `name` on `engine`, or why it is refused.
pub fn setting(engine: Engine, name: &str) -> Result<Setting, Refusal> {
    let name = canonical(engine, name);
    let owned = match engine {
        Engine::Postgres => tables::POSTGRES_OWNED,
        Engine::Mysql => tables::MYSQL_OWNED,
        Engine::Mongodb => tables::MONGODB_OWNED,
    };
    if let Some((_, why)) = owned.iter().find(|(owned, _)| owned_matches(owned, &name)) {
        return Err(Refusal::Owned(why));
    }
    allowed(engine)
        .iter()
        .find(|s| s.name == name)
        .copied()
        .ok_or(Refusal::Unknown)
}

/// An owned entry ending in `*` covers every name with that prefix.
fn owned_matches(owned: &str, name: &str) -> bool {
    match owned.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => owned == name,
    }
}

/// What is wrong with a value, if anything: every engine's file takes one line, and
/// mysql's has no quoting, so a few characters cannot be written safely.
pub fn value_problem(engine: Engine, value: &str) -> Option<&'static str> {
    if value.is_empty() {
        return Some("must not be empty");
    }
    if value.len() > 1024 {
        return Some("must be at most 1024 characters");
    }
    if value.chars().any(char::is_control) {
        return Some("must be one line without control characters");
    }
    if engine == Engine::Mysql && value.chars().any(|c| matches!(c, '#' | '"' | '\'' | '\\')) {
        return Some(
            "must not contain #, quotes or backslashes (a mysql option file cannot hold them safely)",
        );
    }
    None
}

/// The memory settings that follow a container's memory limit, for those the user did
/// not set: postgres `shared_buffers` (a quarter) and `effective_cache_size` (three
/// quarters), mysql `innodb_buffer_pool_size` (half), and mongodb's WiredTiger cache
/// (half of what is left after 1 GiB, at least 0.25 GiB, as mongod sizes it for the
/// machine's memory).
pub fn memory_settings(engine: Engine, limit_bytes: u64) -> Vec<(&'static str, String)> {
    const MIB: u64 = 1024 * 1024;
    const GIB: u64 = 1024 * MIB;
    let mib = |fraction: u64, of: u64| format!("{}MB", (limit_bytes / of * fraction) / MIB);
    match engine {
        Engine::Postgres => vec![
            ("shared_buffers", mib(1, 4)),
            ("effective_cache_size", mib(3, 4)),
        ],
        Engine::Mysql => vec![(
            "innodb_buffer_pool_size",
            format!("{}M", limit_bytes / 2 / MIB),
        )],
        Engine::Mongodb => {
            // Hundredths of a GiB, so the value is exact in the file.
            let hundredths = (limit_bytes.saturating_sub(GIB) / 2 * 100 / GIB).max(25);
            vec![(
                "storage.wiredTiger.engineConfig.cacheSizeGB",
                format!("{}.{:02}", hundredths / 100, hundredths % 100),
            )]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_engine_tells_owned_from_unknown_from_allowed() {
        assert_eq!(lookup(Engine::Postgres, "work_mem"), Ok(Takes::Reload));
        assert_eq!(
            lookup(Engine::Postgres, "shared_buffers"),
            Ok(Takes::Restart)
        );
        assert!(matches!(
            lookup(Engine::Postgres, "port"),
            Err(Refusal::Owned(_))
        ));
        assert!(matches!(
            lookup(Engine::Postgres, "ssl_cert_file"),
            Err(Refusal::Owned(_))
        ));
        assert_eq!(lookup(Engine::Postgres, "wrok_mem"), Err(Refusal::Unknown));
        assert_eq!(lookup(Engine::Mysql, "max-connections"), Ok(Takes::Reload));
        assert_eq!(
            lookup(Engine::Mysql, "innodb_buffer_pool_instances"),
            Ok(Takes::Restart)
        );
        assert!(matches!(
            lookup(Engine::Mysql, "gtid-mode"),
            Err(Refusal::Owned(_))
        ));
        assert_eq!(
            lookup(
                Engine::Mongodb,
                "storage.wiredTiger.engineConfig.cacheSizeGB"
            ),
            Ok(Takes::Restart)
        );
        assert!(matches!(
            lookup(Engine::Mongodb, "replication.replSetName"),
            Err(Refusal::Owned(_))
        ));
    }

    #[test]
    fn no_setting_is_both_allowed_and_owned() {
        for engine in Engine::ALL {
            for setting in allowed(engine) {
                assert_eq!(
                    lookup(engine, setting.name),
                    Ok(setting.takes),
                    "{engine} {}",
                    setting.name
                );
            }
        }
    }

    #[test]
    fn values_are_checked_by_the_settings_kind() {
        let problem = |engine, name, value| {
            setting(engine, name)
                .ok()
                .and_then(|s| s.kind.problem(value))
        };
        for (name, good) in [
            ("work_mem", "16MB"),
            ("work_mem", "4096"),
            ("statement_timeout", "30s"),
            ("log_min_duration_statement", "-1"),
            ("random_page_cost", "1.1"),
            ("jit", "off"),
            ("log_statement", "DDL"),
        ] {
            assert_eq!(
                problem(Engine::Postgres, name, good),
                None,
                "{name} = {good}"
            );
        }
        for (name, bad) in [
            ("work_mem", "16 megabytes"),
            ("work_mem", "16mb"),
            ("max_connections", "many"),
            ("statement_timeout", "1.5s"),
            ("jit", "maybe"),
        ] {
            assert!(
                problem(Engine::Postgres, name, bad).is_some(),
                "{name} = {bad}"
            );
        }
        assert_eq!(
            problem(Engine::Mysql, "innodb_buffer_pool_size", "512M"),
            None
        );
        assert!(problem(Engine::Mysql, "transaction_isolation", "SNAPSHOT").is_some());
        assert_eq!(
            problem(
                Engine::Mongodb,
                "storage.wiredTiger.engineConfig.cacheSizeGB",
                "0.75"
            ),
            None
        );
        assert!(problem(Engine::Mongodb, "setParameter.cursorTimeoutMillis", "1m").is_some());
    }

    #[test]
    fn memory_settings_follow_the_limit() {
        let gib = 1024 * 1024 * 1024;
        assert_eq!(
            memory_settings(Engine::Postgres, 2 * gib),
            [
                ("shared_buffers", "512MB".to_owned()),
                ("effective_cache_size", "1536MB".to_owned())
            ]
        );
        assert_eq!(
            memory_settings(Engine::Mysql, gib),
            [("innodb_buffer_pool_size", "512M".to_owned())]
        );
        let cache = |limit| memory_settings(Engine::Mongodb, limit)[0].1.clone();
        assert_eq!(cache(gib), "0.25");
        assert_eq!(cache(4 * gib), "1.50");
        assert_eq!(cache(512 * 1024 * 1024), "0.25");
    }

    #[test]
    fn values_that_would_break_the_file_are_refused() {
        assert!(value_problem(Engine::Postgres, "it's fine").is_none());
        assert!(value_problem(Engine::Postgres, "").is_some());
        assert!(value_problem(Engine::Postgres, "a\nb").is_some());
        assert!(value_problem(Engine::Mysql, "STRICT_TRANS_TABLES,NO_ZERO_DATE").is_none());
        assert!(value_problem(Engine::Mysql, "x # y").is_some());
    }
}
