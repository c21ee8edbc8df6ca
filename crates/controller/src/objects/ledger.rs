//! What the controller knows of each object it owns without reading it.
//!
//! The owned objects' metadata watches note the resourceVersion each object is at; a
//! pass notes the resourceVersion and desired hash at which it found (or made) an object
//! as it wanted it. While the two versions agree, nobody has written the object since:
//! a pass that wants the same hash again neither reads nor writes it, and the watch
//! event that only echoes the controller's own write brings no pass.
//!
//! A watch that has not yet seen a write, or an entry lost to a relist, only makes the
//! next pass read the object, as it would without the ledger. Entries are keyed by a
//! fingerprint of namespace and name, not the names themselves, so that 10,000
//! Databases' objects take a few MiB: two objects whose fingerprints collide cannot
//! pass for each other, as no two writes share a resourceVersion.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Mutex;

use kube::Resource;
use kube::api::ObjectMeta;
use kube::runtime::watcher::Event;

use super::drift::HASH_ANNOTATION;

/// The version and desired hash at which a pass last found an object as it wanted it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verified {
    pub resource_version: u64,
    pub hash: u64,
}

#[derive(Default)]
struct Entry {
    /// The resourceVersion the watch last reported; 0 until it reports one.
    seen: u64,
    verified: Option<Verified>,
}

/// One watch's objects: a kind in one namespace, or in all of them.
#[derive(Default)]
struct Table {
    /// Whether the watch has listed every object once since it (re)started.
    synced: bool,
    entries: HashMap<u64, Entry>,
}

#[derive(Default)]
pub struct Ledger {
    tables: Mutex<HashMap<(String, Option<String>), Table>>,
}

impl Ledger {
    /// Notes an event of the watch of kind `K` in `scope` (a namespace, or all).
    pub fn watched<K: Resource<DynamicType = ()>>(&self, scope: Option<&str>, event: &Event<K>) {
        let Ok(mut tables) = self.tables.lock() else {
            return;
        };
        let table = tables
            .entry((K::kind(&()).into_owned(), scope.map(str::to_owned)))
            .or_default();
        match event {
            // A relist: what it does not list again is gone.
            Event::Init => {
                table.synced = false;
                table.entries.values_mut().for_each(|entry| entry.seen = 0);
            }
            Event::InitDone => {
                table.entries.retain(|_, entry| entry.seen != 0);
                table.synced = true;
            }
            Event::InitApply(object) | Event::Apply(object) => {
                if let Some(version) = version_of(object.meta()) {
                    let entry = table.entries.entry(key_of(object.meta())).or_default();
                    entry.seen = version;
                }
            }
            Event::Delete(object) => {
                table.entries.remove(&key_of(object.meta()));
            }
        }
    }

    /// Notes that `meta`'s object, of kind `K`, is as the pass wants it: its own
    /// desired hash (in the hash annotation), at its resourceVersion.
    pub fn verified<K: Resource<DynamicType = ()>>(&self, meta: &ObjectMeta) {
        let (Some(resource_version), Some(hash)) = (version_of(meta), hash_of(meta)) else {
            return;
        };
        let Some(namespace) = meta.namespace.as_deref() else {
            return;
        };
        let verified = Verified {
            resource_version,
            hash,
        };
        self.with_table::<K, _>(namespace, true, |table| {
            table.entries.entry(key_of(meta)).or_default().verified = Some(verified);
        });
    }

    /// What a pass verified of the object of kind `K` named `name`, when the watch
    /// has seen no write of it since.
    pub fn current<K: Resource<DynamicType = ()>>(
        &self,
        namespace: &str,
        name: &str,
    ) -> Option<Verified> {
        let key = key(namespace, name);
        self.with_table::<K, _>(namespace, false, |table| {
            let entry = table.entries.get(&key)?;
            entry
                .verified
                .filter(|verified| verified.resource_version == entry.seen)
        })
        .flatten()
    }

    /// Whether the watch of kind `K`, having listed everything, knows of no object named
    /// `name` with the operator's label: none of this Database's exists. (One someone
    /// else made, without the label, may.)
    pub fn none_of_ours<K: Resource<DynamicType = ()>>(&self, namespace: &str, name: &str) -> bool {
        let key = key(namespace, name);
        self.with_table::<K, _>(namespace, false, |table| {
            table.synced
                && table
                    .entries
                    .get(&key)
                    .is_none_or(|entry| entry.seen == 0 && entry.verified.is_none())
        })
        .unwrap_or(false)
    }

    /// Whether the watch of kind `K` has seen an object named `name` (one with the
    /// operator's label) and no deletion of it since.
    pub fn exists<K: Resource<DynamicType = ()>>(&self, namespace: &str, name: &str) -> bool {
        let key = key(namespace, name);
        self.with_table::<K, _>(namespace, false, |table| {
            table.entries.get(&key).is_some_and(|entry| entry.seen != 0)
        })
        .unwrap_or(false)
    }

    /// Whether `meta` is a version of its object this controller wrote or verified
    /// itself, which its watch event only echoes.
    pub fn is_echo<K: Resource<DynamicType = ()>>(&self, meta: &ObjectMeta) -> bool {
        let (Some(namespace), Some(name), Some(version)) = (
            meta.namespace.as_deref(),
            meta.name.as_deref(),
            version_of(meta),
        ) else {
            return false;
        };
        self.current::<K>(namespace, name)
            .is_some_and(|verified| verified.resource_version == version)
    }

    /// Runs `f` on the table of kind `K` that holds `namespace` (the namespace's own
    /// watch, else the one of all namespaces); `create` makes the all-namespaces table
    /// when there is none.
    fn with_table<K: Resource<DynamicType = ()>, T>(
        &self,
        namespace: &str,
        create: bool,
        f: impl FnOnce(&mut Table) -> T,
    ) -> Option<T> {
        let mut tables = self.tables.lock().ok()?;
        let kind = K::kind(&()).into_owned();
        let own = (kind.clone(), Some(namespace.to_owned()));
        let scope = if tables.contains_key(&own) {
            own
        } else {
            (kind, None)
        };
        match tables.get_mut(&scope) {
            Some(table) => Some(f(table)),
            None if create => Some(f(tables.entry(scope).or_default())),
            None => None,
        }
    }

    /// How many objects the ledger holds, over every watch.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.tables
            .lock()
            .map_or(0, |tables| tables.values().map(|t| t.entries.len()).sum())
    }

    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn key_of(meta: &ObjectMeta) -> u64 {
    key(
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default(),
    )
}

fn key(namespace: &str, name: &str) -> u64 {
    let mut hasher = DefaultHasher::new();
    (namespace, name).hash(&mut hasher);
    hasher.finish()
}

/// The resourceVersion as a number: etcd's revisions are; any other opaque string is
/// fingerprinted. Zero is no version.
fn version_of(meta: &ObjectMeta) -> Option<u64> {
    let version = meta.resource_version.as_deref()?;
    let number = version.parse::<u64>().unwrap_or_else(|_| {
        let mut hasher = DefaultHasher::new();
        version.hash(&mut hasher);
        hasher.finish()
    });
    (number != 0).then_some(number)
}

fn hash_of(meta: &ObjectMeta) -> Option<u64> {
    parse_hash(meta.annotations.as_ref()?.get(HASH_ANNOTATION)?)
}

/// A desired hash (as the annotation holds it) as the ledger keeps it.
pub fn parse_hash(hash: &str) -> Option<u64> {
    u64::from_str_radix(hash, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Service;
    use kube::core::PartialObjectMeta;

    fn meta(name: &str, version: &str, hash: Option<&str>) -> ObjectMeta {
        ObjectMeta {
            name: Some(name.into()),
            namespace: Some("shop".into()),
            resource_version: Some(version.into()),
            annotations: hash.map(|h| [(HASH_ANNOTATION.to_owned(), h.to_owned())].into()),
            ..ObjectMeta::default()
        }
    }

    fn seen(name: &str, version: &str) -> PartialObjectMeta<Service> {
        PartialObjectMeta {
            metadata: meta(name, version, None),
            ..PartialObjectMeta::default()
        }
    }

    const HASH: &str = "00000000000000ab";

    #[test]
    fn an_object_is_current_while_the_watch_has_seen_no_write_after_the_verified_one() {
        let ledger = Ledger::default();
        ledger.watched(None, &Event::Apply(seen("orders", "10")));
        assert_eq!(ledger.current::<Service>("shop", "orders"), None);
        ledger.verified::<Service>(&meta("orders", "10", Some(HASH)));
        let verified = ledger.current::<Service>("shop", "orders");
        assert_eq!(
            verified,
            Some(Verified {
                resource_version: 10,
                hash: 0xab
            })
        );
        assert!(ledger.is_echo::<Service>(&meta("orders", "10", None)));
        // Someone else's write.
        ledger.watched(None, &Event::Apply(seen("orders", "11")));
        assert_eq!(ledger.current::<Service>("shop", "orders"), None);
        assert!(!ledger.is_echo::<Service>(&meta("orders", "11", None)));
    }

    #[test]
    fn an_object_exists_from_the_watch_s_first_sight_until_its_deletion() {
        let ledger = Ledger::default();
        assert!(!ledger.exists::<Service>("shop", "orders"));
        // What a pass verified alone is not proof: the object may be gone since.
        ledger.verified::<Service>(&meta("orders", "10", Some(HASH)));
        assert!(!ledger.exists::<Service>("shop", "orders"));
        ledger.watched(None, &Event::Apply(seen("orders", "10")));
        assert!(ledger.exists::<Service>("shop", "orders"));
        assert!(!ledger.exists::<Service>("shop", "orders-rw"));
        ledger.watched(None, &Event::Delete(seen("orders", "10")));
        assert!(!ledger.exists::<Service>("shop", "orders"));
    }

    #[test]
    fn a_write_the_watch_has_not_reported_yet_is_not_current_until_it_does() {
        let ledger = Ledger::default();
        ledger.watched(None, &Event::Apply(seen("orders", "10")));
        ledger.verified::<Service>(&meta("orders", "12", Some(HASH)));
        assert_eq!(ledger.current::<Service>("shop", "orders"), None);
        ledger.watched(None, &Event::Apply(seen("orders", "12")));
        assert!(ledger.current::<Service>("shop", "orders").is_some());
    }

    #[test]
    fn a_deleted_object_or_one_a_relist_no_longer_lists_is_forgotten() {
        let ledger = Ledger::default();
        for name in ["orders", "orders-rw"] {
            ledger.watched(None, &Event::Apply(seen(name, "10")));
            ledger.verified::<Service>(&meta(name, "10", Some(HASH)));
        }
        ledger.watched(None, &Event::Delete(seen("orders", "10")));
        assert_eq!(ledger.current::<Service>("shop", "orders"), None);

        ledger.watched::<PartialObjectMeta<Service>>(None, &Event::Init);
        assert_eq!(ledger.current::<Service>("shop", "orders-rw"), None);
        ledger.watched::<PartialObjectMeta<Service>>(None, &Event::InitDone);
        assert!(ledger.is_empty());
    }

    #[test]
    fn a_relist_that_lists_the_object_again_keeps_what_was_verified() {
        let ledger = Ledger::default();
        ledger.watched(None, &Event::Apply(seen("orders", "10")));
        ledger.verified::<Service>(&meta("orders", "10", Some(HASH)));
        ledger.watched::<PartialObjectMeta<Service>>(None, &Event::Init);
        ledger.watched(None, &Event::InitApply(seen("orders", "10")));
        ledger.watched::<PartialObjectMeta<Service>>(None, &Event::InitDone);
        assert!(ledger.current::<Service>("shop", "orders").is_some());
    }

    #[test]
    fn only_a_watch_that_has_listed_everything_knows_an_object_is_not_there() {
        let ledger = Ledger::default();
        assert!(
            !ledger.none_of_ours::<Service>("shop", "orders"),
            "no watch yet"
        );
        ledger.watched::<PartialObjectMeta<Service>>(None, &Event::Init);
        ledger.watched(None, &Event::InitApply(seen("orders", "10")));
        assert!(
            !ledger.none_of_ours::<Service>("shop", "orders-ro"),
            "still listing"
        );
        ledger.watched::<PartialObjectMeta<Service>>(None, &Event::InitDone);
        assert!(ledger.none_of_ours::<Service>("shop", "orders-ro"));
        assert!(!ledger.none_of_ours::<Service>("shop", "orders"));
        // Written by a pass, not yet reported by the watch.
        ledger.verified::<Service>(&meta("orders-rw", "11", Some(HASH)));
        assert!(!ledger.none_of_ours::<Service>("shop", "orders-rw"));
        ledger.watched(None, &Event::Delete(seen("orders", "10")));
        assert!(ledger.none_of_ours::<Service>("shop", "orders"));
        ledger.watched::<PartialObjectMeta<Service>>(None, &Event::Init);
        assert!(
            !ledger.none_of_ours::<Service>("shop", "orders"),
            "relisting"
        );
    }

    #[test]
    fn kinds_and_namespaces_are_kept_apart() {
        use k8s_openapi::api::core::v1::ConfigMap;
        let ledger = Ledger::default();
        ledger.watched(None, &Event::Apply(seen("orders", "10")));
        ledger.verified::<Service>(&meta("orders", "10", Some(HASH)));
        assert_eq!(ledger.current::<ConfigMap>("shop", "orders"), None);
        assert_eq!(ledger.current::<Service>("other", "orders"), None);
    }

    #[test]
    fn an_object_without_a_hash_or_version_is_never_verified() {
        let ledger = Ledger::default();
        ledger.watched(None, &Event::Apply(seen("orders", "10")));
        ledger.verified::<Service>(&meta("orders", "10", None));
        ledger.verified::<Service>(&meta("orders", "10", Some("not hex")));
        assert_eq!(ledger.current::<Service>("shop", "orders"), None);
    }
}
