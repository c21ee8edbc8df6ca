//! When each Database's named primary was first seen gone or not ready, remembered
//! across its Pods: a replacement Pod created once the old one is gone has no history
//! of its own and must not restart the failover clock. Kept in memory: a restarted
//! controller starts the clock again, which only ever delays a failover.

use std::collections::HashMap;
use std::sync::Mutex;

use jiff::Timestamp;

/// Per Database (`namespace/name`): the primary's Pod name and since when it has been
/// not ready.
#[derive(Debug, Default)]
pub struct Outages {
    since: Mutex<HashMap<String, (String, Timestamp)>>,
}

impl Outages {
    /// The earlier of `observed` (when the Pod itself says it stopped being ready;
    /// `None` while it is ready) and what was remembered for the same primary; it is
    /// remembered in turn, and forgotten once the primary is ready.
    pub fn note(
        &self,
        database: &str,
        pod: &str,
        observed: Option<Timestamp>,
    ) -> Option<Timestamp> {
        let Ok(mut since) = self.since.lock() else {
            return observed;
        };
        let Some(at) = observed else {
            since.remove(database);
            return None;
        };
        let earliest = match since.get(database) {
            Some((primary, remembered)) if primary == pod => at.min(*remembered),
            _ => at,
        };
        since.insert(database.to_owned(), (pod.to_owned(), earliest));
        Some(earliest)
    }

    /// Forgets a deleted Database, so the memory holds only Databases that exist.
    pub fn forget(&self, database: &str) {
        if let Ok(mut since) = self.since.lock() {
            since.remove(database);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + second).expect("time")
    }

    #[test]
    fn a_deleted_database_is_forgotten() {
        let outages = Outages::default();
        outages.note("shop/orders", "orders-0", Some(at(0)));
        outages.forget("shop/orders");
        assert_eq!(
            outages.note("shop/orders", "orders-0", Some(at(30))),
            Some(at(30)),
            "a Database of the same name starts a clock of its own"
        );
    }

    #[test]
    fn a_replacement_pod_keeps_the_clock_of_the_one_it_replaces() {
        let outages = Outages::default();
        assert_eq!(
            outages.note("shop/orders", "orders-0", Some(at(0))),
            Some(at(0))
        );
        // The old Pod is gone; its replacement was created 12 s later.
        assert_eq!(
            outages.note("shop/orders", "orders-0", Some(at(12))),
            Some(at(0))
        );
    }

    #[test]
    fn a_ready_primary_or_another_primary_starts_afresh() {
        let outages = Outages::default();
        outages.note("shop/orders", "orders-0", Some(at(0)));
        assert_eq!(outages.note("shop/orders", "orders-0", None), None);
        assert_eq!(
            outages.note("shop/orders", "orders-0", Some(at(30))),
            Some(at(30))
        );
        assert_eq!(
            outages.note("shop/orders", "orders-1", Some(at(40))),
            Some(at(40))
        );
        assert_eq!(
            outages.note("shop/other", "other-0", Some(at(50))),
            Some(at(50)),
            "Databases are apart"
        );
    }
}
