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
