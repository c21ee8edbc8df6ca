//! Watches as a controller uses them: a short retry policy, keys from watch results,
//! objects passed on only once the cache holds them, and the owners of changed owned
//! objects from metadata-only watches.
//!
//! kube-runtime's `Controller` wires these itself; they are separate here because the
//! dispatcher in [`crate::controller`] is (see there for the target it buys).

use std::sync::Arc;
use std::time::Duration;

use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use kube::core::PartialObjectMeta;
use kube::runtime::controller::trigger_owners;
use kube::runtime::reflector::{ObjectRef, ObjectRefExtra, Store};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Api, Client};

use crate::errors::watch_message;

/// Retry delays for a broken watch: 0.5 s doubling to 2 s. After an API server restart
/// every watch gets 410 Gone and lists again; kube's default, which climbs to 30 s,
/// would leave the controller blind that long, where this cap keeps it to seconds.
/// Each watch has its own.
#[derive(Debug, Clone)]
pub struct WatchBackoff {
    next: Duration,
}

const FIRST_RETRY: Duration = Duration::from_millis(500);
const MAX_RETRY: Duration = Duration::from_secs(2);

impl Default for WatchBackoff {
    fn default() -> Self {
        Self { next: FIRST_RETRY }
    }
}

impl Iterator for WatchBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let current = self.next;
        self.next = (self.next * 2).min(MAX_RETRY);
        Some(current)
    }
}

impl kube::runtime::utils::Backoff for WatchBackoff {
    fn reset(&mut self) {
        self.next = FIRST_RETRY;
    }
}

/// An API for kind `K` in one namespace, or in all of them.
pub fn scoped_api<K>(client: &Client, namespace: Option<&str>) -> Api<K>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

/// Keys from watch results: a failed watch retries after its backoff and yields none.
pub fn keys_of<K>(
    results: impl Stream<Item = Result<ObjectRef<K>, watcher::Error>>,
) -> impl Stream<Item = ObjectRef<K>>
where
    K: kube::Resource,
    K::DynamicType: Default,
{
    results.filter_map(|result| async move {
        match result {
            // The uid and resourceVersion a key carries play no part in finding the
            // object; dropping them keeps each waiting key small.
            Ok(mut key) => {
                key.extra = ObjectRefExtra::default();
                Some(key)
            }
            Err(err) => {
                // The watch retries after its backoff; its cache stays as it was.
                tracing::info!(error = %watch_message(&err), "watch failed; retrying");
                None
            }
        }
    })
}

/// The objects a watch reports, each at a moment the cache already holds it, so the
/// reconcile it triggers finds it there. A list's objects only reach the cache all at
/// once, when the list ends, so they are passed on from the cache then, not one by one
/// as they arrive (that would drop an object created while the watch was down: its
/// reconcile would start before the cache had it).
pub fn cached<K>(
    events: impl Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
    cache: Store<K>,
) -> impl Stream<Item = Result<K, watcher::Error>> + Send + 'static
where
    K: kube::Resource + Clone + Send + Sync + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + Send + Sync,
{
    events.flat_map(move |event| {
        let (objects, error) = match event {
            Ok(watcher::Event::Apply(object)) => (vec![Arc::new(object)], None),
            Ok(watcher::Event::InitDone) => (cache.state(), None),
            Ok(watcher::Event::Init | watcher::Event::InitApply(_) | watcher::Event::Delete(_)) => {
                (Vec::new(), None)
            }
            Err(err) => (Vec::new(), Some(err)),
        };
        // Cloned one at a time as the stream is read: a relist of thousands of
        // objects never holds a second copy of them all.
        let objects = objects
            .into_iter()
            .map(|object| Ok(Arc::try_unwrap(object).unwrap_or_else(|shared| (*shared).clone())));
        futures::stream::iter(error.map(Err).into_iter().chain(objects))
    })
}

/// How long a [`changed`] entry lasts unseen, as in kube's `predicate_filter`.
const CHANGED_TTL: Duration = Duration::from_secs(3600);

/// kube's `predicate_filter`, keyed by a fingerprint: passes an object on only when
/// `predicate`'s hash of it differs from the one last passed on for the same object
/// (namespace, name and uid). kube keys its cache by those three strings, about 200
/// bytes an object with its table; a 64-bit fingerprint makes it 24, which at 10,000
/// objects is about 2 MiB less. Two objects whose fingerprints collide at worst bring
/// a pass too many. An entry unseen for an hour goes, as in kube: its object's next
/// event then passes.
pub fn changed<K, P>(
    objects: impl Stream<Item = Result<K, watcher::Error>> + Send + 'static,
    predicate: P,
) -> impl Stream<Item = Result<K, watcher::Error>> + Send + 'static
where
    K: kube::Resource + Send + 'static,
    P: kube::runtime::Predicate<K> + Send + 'static,
{
    changed_within(objects, predicate, CHANGED_TTL)
}

/// [`changed`], its entries lasting `ttl` unseen.
fn changed_within<K, P>(
    objects: impl Stream<Item = Result<K, watcher::Error>> + Send + 'static,
    predicate: P,
    ttl: Duration,
) -> impl Stream<Item = Result<K, watcher::Error>> + Send + 'static
where
    K: kube::Resource + Send + 'static,
    P: kube::runtime::Predicate<K> + Send + 'static,
{
    let start = std::time::Instant::now();
    let mut last: std::collections::HashMap<u64, (u64, u32)> = std::collections::HashMap::new();
    let mut evicted = 0u32;
    let ttl = u32::try_from(ttl.as_secs()).unwrap_or(u32::MAX);
    objects.filter(move |item| {
        let pass = match item {
            Err(_) => true,
            Ok(object) => match predicate.hash_property(object) {
                None => true,
                Some(hash) => {
                    let now = u32::try_from(start.elapsed().as_secs()).unwrap_or(u32::MAX);
                    if now.saturating_sub(evicted) >= ttl {
                        last.retain(|_, (_, seen)| now.saturating_sub(*seen) < ttl);
                        evicted = now;
                    }
                    let before = last.insert(fingerprint(object.meta()), (hash, now));
                    before.is_none_or(|(was, seen)| was != hash || now.saturating_sub(seen) >= ttl)
                }
            },
        };
        futures::future::ready(pass)
    })
}

/// A 64-bit fingerprint of an object's namespace, name and uid.
fn fingerprint(meta: &kube::api::ObjectMeta) -> u64 {
    use std::hash::{Hash as _, Hasher as _};
    let mut hasher = std::hash::DefaultHasher::new();
    (&meta.namespace, &meta.name, &meta.uid).hash(&mut hasher);
    hasher.finish()
}

/// A namespaced kind of object a controller owns and watches the metadata of.
pub trait OwnedKind:
    kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
    + Clone
    + serde::de::DeserializeOwned
    + std::fmt::Debug
    + Send
    + 'static
{
}

impl<K> OwnedKind for K where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + 'static
{
}

/// The owners (of kind `O`) of the objects of kind `K` that change and match
/// `label_selector`. Only metadata is watched: that keeps every owned object's body
/// out of memory, and the selector keeps objects nobody here owns out of it too.
pub fn owners_of_changed<K, O>(
    client: &Client,
    namespace: Option<&str>,
    label_selector: &str,
) -> BoxStream<'static, Result<ObjectRef<O>, watcher::Error>>
where
    K: OwnedKind,
    O: kube::Resource<DynamicType = ()> + Send + 'static,
{
    owners_of_changed_noted::<K, O>(client, namespace, label_selector, |_| true)
}

/// [`owners_of_changed`], with every event shown to `note` first (to keep a record of
/// the objects' versions, say); an object whose change `note` answers `false` to
/// triggers no owner. A deletion always does.
pub fn owners_of_changed_noted<K, O>(
    client: &Client,
    namespace: Option<&str>,
    label_selector: &str,
    note: impl Fn(&watcher::Event<PartialObjectMeta<K>>) -> bool + Send + 'static,
) -> BoxStream<'static, Result<ObjectRef<O>, watcher::Error>>
where
    K: OwnedKind,
    O: kube::Resource<DynamicType = ()> + Send + 'static,
{
    let owned = watcher::Config::default().labels(label_selector);
    let events = watcher(scoped_api::<PartialObjectMeta<K>>(client, namespace), owned)
        .backoff(WatchBackoff::default());
    trigger_owners(noted(events, note).touched_objects(), (), ())
        .map(|result| result.map(|request| request.obj_ref))
        .boxed()
}

/// `events`, each shown to `note`, without the changes `note` answers `false` to.
fn noted<K>(
    events: impl Stream<Item = Result<watcher::Event<K>, watcher::Error>>,
    note: impl Fn(&watcher::Event<K>) -> bool,
) -> impl Stream<Item = Result<watcher::Event<K>, watcher::Error>> {
    events.filter(move |result| {
        let keep = match result {
            Ok(event @ (watcher::Event::Apply(_) | watcher::Event::InitApply(_))) => note(event),
            Ok(event) => {
                note(event);
                true
            }
            Err(_) => true,
        };
        futures::future::ready(keep)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::ResourceExt as _;
    use kube::runtime::reflector;
    use kube::runtime::utils::Backoff as _;
    use kube::runtime::watcher::Event;

    fn map(name: &str) -> ConfigMap {
        let mut map = ConfigMap::default();
        map.metadata.name = Some(name.to_owned());
        map.metadata.namespace = Some("shop".to_owned());
        map
    }

    #[tokio::test]
    async fn only_objects_whose_predicate_hash_changed_pass() {
        let version = |name: &str, generation: i64, uid: &str| {
            let mut object = map(name);
            object.metadata.generation = Some(generation);
            object.metadata.uid = Some(uid.to_owned());
            Ok(object)
        };
        let objects = vec![
            version("a", 1, "u-a"),
            version("b", 1, "u-b"),
            version("a", 1, "u-a"),
            version("a", 2, "u-a"),
            version("b", 1, "u-b"),
            // The same name again, a new object: it passes.
            version("b", 1, "u-b2"),
            Err(watcher::Error::NoResourceVersion),
        ];
        let passed: Vec<String> = changed(
            futures::stream::iter(objects),
            kube::runtime::predicates::generation,
        )
        .map(|item| match item {
            Ok(object) => format!(
                "{}@{}/{}",
                object.name_any(),
                object.metadata.generation.unwrap_or_default(),
                object.metadata.uid.unwrap_or_default()
            ),
            Err(_) => "error".to_owned(),
        })
        .collect()
        .await;
        assert_eq!(
            passed,
            ["a@1/u-a", "b@1/u-b", "a@2/u-a", "b@1/u-b2", "error"]
        );

        // An entry past its time no longer holds an object back.
        let again = vec![version("a", 1, "u-a"), version("a", 1, "u-a")];
        let passed = changed_within(
            futures::stream::iter(again),
            kube::runtime::predicates::generation,
            Duration::ZERO,
        )
        .count()
        .await;
        assert_eq!(passed, 2);
    }

    /// A relist (Init, InitApply..., InitDone) after an earlier list: each object
    /// comes out only once the cache holds it, and a watch event at once.
    #[tokio::test]
    async fn objects_come_out_once_the_cache_holds_them() {
        let (reader, writer) = reflector::store();
        let events = vec![
            Ok(Event::Init),
            Ok(Event::InitApply(map("old"))),
            Ok(Event::InitDone),
            Ok(Event::Init),
            Ok(Event::InitApply(map("old"))),
            Ok(Event::InitApply(map("new"))),
            Ok(Event::InitDone),
            Ok(Event::Apply(map("changed"))),
            Ok(Event::Delete(map("old"))),
        ];
        let stream = cached(
            futures::stream::iter(events).reflect(writer),
            reader.clone(),
        );
        let mut stream = std::pin::pin!(stream);
        let mut seen = Vec::new();
        while let Some(item) = stream.next().await {
            let object = item.expect("no errors were sent");
            assert!(
                reader.get(&ObjectRef::from_obj(&object)).is_some(),
                "{} came out before the cache held it",
                object.name_any()
            );
            seen.push(object.name_any());
        }
        let (first, rest) = seen.split_at(1);
        assert_eq!(first, ["old"]);
        let mut relisted = rest[..2].to_vec();
        relisted.sort();
        assert_eq!(relisted, ["new", "old"]);
        assert_eq!(rest[2..], ["changed"]);
    }

    /// Every event reaches `note`; only the changes it refuses are dropped.
    #[tokio::test]
    async fn noted_events_drop_only_the_changes_refused() {
        let events = vec![
            Ok(Event::Init),
            Ok(Event::InitApply(map("listed-echo"))),
            Ok(Event::InitDone),
            Ok(Event::Apply(map("echo"))),
            Ok(Event::Apply(map("changed"))),
            Ok(Event::Delete(map("echo"))),
        ];
        let shown = std::sync::Mutex::new(0);
        let kept: Vec<_> = noted(futures::stream::iter(events), |event| {
            *shown.lock().expect("not poisoned") += 1;
            !matches!(event, Event::Apply(m) | Event::InitApply(m) if m.name_any().contains("echo"))
        })
        .touched_objects()
        .map(|object| object.expect("no errors were sent").name_any())
        .collect()
        .await;
        assert_eq!(kept, ["changed", "echo"]);
        assert_eq!(*shown.lock().expect("not poisoned"), 6);
    }

    #[test]
    fn watch_retries_double_up_to_two_seconds_and_reset() {
        let mut backoff = WatchBackoff::default();
        let delays: Vec<u64> = backoff
            .by_ref()
            .take(6)
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(0))
            .collect();
        assert_eq!(delays, [500, 1000, 2000, 2000, 2000, 2000]);
        backoff.reset();
        assert_eq!(backoff.next(), Some(FIRST_RETRY));
    }
}
