//! The status writes the Database cache has not caught up with yet. Passes run back to
//! back as a Database's Pods and StatefulSet change, and one that starts before the
//! watch has brought the last pass's status compares with the status before it: it
//! would write the same status again, which the API server answers with the whole
//! update path for nothing. An entry lives from a write until a pass finds the cache
//! past the version the write was made on, or for [`LASTS`] at most: the pass that
//! could still hold that version ends long before, and a Database whose last pass
//! wrote its status keeps no entry at rest.

use std::collections::HashMap;
use std::hash::Hasher as _;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use database_api::{Database, DatabaseStatus};

/// How long an entry lasts at most.
pub const LASTS: Duration = Duration::from_secs(10);

/// Per Database (by namespace, name and uid): the cached version a status write was
/// made on and what it wrote, both as fingerprints, and when (seconds from `start`).
#[derive(Debug)]
pub struct StatusWrites {
    start: Instant,
    writes: Mutex<Writes>,
}

#[derive(Debug, Default)]
struct Writes {
    entries: HashMap<u64, (u64, u64, u64)>,
    pruned: u64,
}

impl Default for StatusWrites {
    fn default() -> Self {
        Self {
            start: Instant::now(),
            writes: Mutex::default(),
        }
    }
}

impl StatusWrites {
    /// Whether this controller already wrote `status` on top of the version of `db` the
    /// cache still shows. An entry the cache has moved past goes.
    pub fn already_written(&self, db: &Database, status: &DatabaseStatus) -> bool {
        let Ok(mut writes) = self.writes.lock() else {
            return false;
        };
        let key = key(db);
        match writes.entries.get(&key) {
            Some(&(on, wrote, _)) if on == version(db) => wrote == fingerprint(status),
            Some(_) => {
                writes.entries.remove(&key);
                false
            }
            None => false,
        }
    }

    /// Notes that `status` was written on top of `db` as cached, and drops the entries
    /// that have lasted [`LASTS`] (looking at most once a second).
    pub fn wrote(&self, db: &Database, status: &DatabaseStatus) {
        let now = self.start.elapsed().as_secs();
        if let Ok(mut writes) = self.writes.lock() {
            if now > writes.pruned {
                let lasts = LASTS.as_secs();
                writes
                    .entries
                    .retain(|_, (_, _, at)| now.saturating_sub(*at) < lasts);
                writes.pruned = now;
            }
            writes
                .entries
                .insert(key(db), (version(db), fingerprint(status), now));
        }
    }

    /// Drops what is known of `db`: the cache shows its status, or it is gone.
    pub fn forget(&self, db: &Database) {
        if let Ok(mut writes) = self.writes.lock() {
            writes.entries.remove(&key(db));
        }
    }

    /// How many entries there are.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.writes.lock().map_or(0, |w| w.entries.len())
    }
}

fn key(db: &Database) -> u64 {
    let meta = &db.metadata;
    hash(&(&meta.namespace, &meta.name, &meta.uid))
}

fn version(db: &Database) -> u64 {
    hash(&db.metadata.resource_version)
}

fn fingerprint(status: &DatabaseStatus) -> u64 {
    hash(&serde_json::to_vec(status).unwrap_or_default())
}

fn hash(value: &impl std::hash::Hash) -> u64 {
    let mut hasher = std::hash::DefaultHasher::new();
    value.hash(&mut hasher);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use database_api::Phase;

    fn cached(version: &str) -> Database {
        let mut db =
            crate::resources::fixtures::database(database_api::Engine::Postgres, "16.4", 1);
        db.metadata.uid = Some("uid-1".into());
        db.metadata.resource_version = Some(version.into());
        db
    }

    fn status(phase: Phase) -> DatabaseStatus {
        DatabaseStatus {
            phase,
            ..DatabaseStatus::default()
        }
    }

    #[test]
    fn the_same_status_on_the_same_cached_version_is_not_written_twice() {
        let writes = StatusWrites::default();
        let (db, running) = (cached("10"), status(Phase::Running));
        assert!(!writes.already_written(&db, &running));
        writes.wrote(&db, &running);
        assert!(writes.already_written(&db, &running));
        // Something else, on the same version: written.
        assert!(!writes.already_written(&db, &status(Phase::Creating)));
    }

    #[test]
    fn once_the_cache_has_moved_on_the_entry_goes() {
        let writes = StatusWrites::default();
        let running = status(Phase::Running);
        writes.wrote(&cached("10"), &running);
        assert!(!writes.already_written(&cached("11"), &running));
        // Gone: even the old version no longer matches.
        assert!(!writes.already_written(&cached("10"), &running));
    }

    #[test]
    fn entries_older_than_their_time_go_with_the_next_write() {
        let mut writes = StatusWrites::default();
        let running = status(Phase::Running);
        writes.wrote(&cached("10"), &running);
        writes.start -= LASTS + Duration::from_secs(1);
        let mut other = cached("20");
        other.metadata.uid = Some("uid-2".into());
        writes.wrote(&other, &running);
        assert_eq!(writes.len(), 1);
        assert!(writes.already_written(&other, &running));
    }

    #[test]
    fn a_forgotten_database_is_written_again() {
        let writes = StatusWrites::default();
        let (db, running) = (cached("10"), status(Phase::Running));
        writes.wrote(&db, &running);
        writes.forget(&db);
        assert!(!writes.already_written(&db, &running));
    }
}
