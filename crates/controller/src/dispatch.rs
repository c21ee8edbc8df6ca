//! Runs reconciles as requests arrive: requests go into the [`WorkQueue`], each ready
//! key is looked up in the cache and reconciled on its own task, and what the reconcile
//! asks for next (a requeue, or nothing until the next change) goes back in.
//!
//! This replaces kube's `Controller` loop for one reason: its scheduler passes every
//! request, even one due at once, through a timer wheel, which holds a watch event
//! for a millisecond or two before its reconcile starts. Here a watch event is
//! reconciled as soon as a worker is free.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt};
use kube::Resource;
use kube::runtime::reflector::{ObjectRef, Store};
use tokio::task::{Id, JoinSet};
use tokio::time::Instant;

use crate::metrics::QueueMetrics;
use crate::queue::WorkQueue;

/// What a reconcile asks for next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Nothing until something changes.
    AwaitChange,
    /// Another reconcile after this long, unless a change brings one sooner.
    RequeueAfter(Duration),
}

impl Action {
    pub fn await_change() -> Self {
        Self::AwaitChange
    }

    pub fn requeue(after: Duration) -> Self {
        Self::RequeueAfter(after)
    }
}

/// How soon a key whose reconcile task died (a panic outside the reconcile's own
/// guard) is tried again.
const AFTER_LOST_TASK: Duration = Duration::from_secs(10);

/// Runs `reconcile` for the keys `triggers` yields until `shutdown` resolves or the
/// triggers end, then waits for the reconciles in flight. A failed reconcile's next
/// step comes from `error_policy`. Keys wait until `store` has its first full list; a
/// key not in the store (deleted since) is dropped. At most `workers.concurrency`
/// reconciles run at once (0: no limit).
pub async fn run<K, Ctx, R, P, Fut, E>(
    triggers: impl Stream<Item = ObjectRef<K>>,
    store: Store<K>,
    reconcile: R,
    error_policy: P,
    context: Arc<Ctx>,
    workers: Workers,
    shutdown: impl Future<Output = ()>,
) where
    K: Resource + Clone + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Send + Sync,
    Ctx: Send + Sync + 'static,
    R: Fn(Arc<K>, Arc<Ctx>) -> Fut,
    P: Fn(Arc<K>, &E, Arc<Ctx>) -> Action + Send + Sync + 'static,
    Fut: Future<Output = Result<Action, E>> + Send + 'static,
    E: Send + 'static,
{
    let error_policy = Arc::new(error_policy);
    let limit = usize::from(workers.concurrency);
    let metrics = workers.metrics.clone();
    // Several loops (one per watched namespace) share the gauge: each adds its change.
    let mut depth_shown = 0_i64;
    let mut tasks: JoinSet<Action> = JoinSet::new();
    // Keys are shared, not copied: a key waiting for a requeue sits in several of the
    // queue's indexes at once, for each of thousands of Databases.
    let mut queue: WorkQueue<Arc<ObjectRef<K>>> = WorkQueue::default();
    let mut keys: HashMap<Id, Arc<ObjectRef<K>>> = HashMap::new();
    let mut triggers = std::pin::pin!(triggers);
    let mut shutdown = std::pin::pin!(shutdown);
    let cache_ready = store.wait_until_ready();
    let mut cache_ready = std::pin::pin!(cache_ready);
    let mut ready = false;
    // One timer for the next requeue, moved when that changes rather than made anew
    // on every turn of the loop.
    let requeue_timer = tokio::time::sleep_until(Instant::now());
    let mut requeue_timer = std::pin::pin!(requeue_timer);
    loop {
        queue.promote_due(Instant::now());
        while ready && let Some((key, waited)) = queue.take(limit) {
            metrics.wait.observe(waited.as_secs_f64());
            let Some(object) = store.get(&key) else {
                queue.done(&key);
                if let Some(forget) = &workers.forget {
                    forget(&format!(
                        "{}/{}",
                        key.namespace.as_deref().unwrap_or_default(),
                        key.name
                    ));
                }
                continue;
            };
            let (context, error_policy) = (context.clone(), error_policy.clone());
            let reconciling = reconcile(object.clone(), context.clone());
            let handle = tasks.spawn(async move {
                match reconciling.await {
                    Ok(action) => action,
                    Err(error) => error_policy(object, &error, context),
                }
            });
            keys.insert(handle.id(), key);
        }
        let depth = i64::try_from(queue.depth().0).unwrap_or(i64::MAX);
        metrics.depth.inc_by(depth - depth_shown);
        depth_shown = depth;
        let next_due = queue.next_due();
        if let Some(at) = next_due
            && requeue_timer.deadline() != at
        {
            requeue_timer.as_mut().reset(at);
        }
        tokio::select! {
            biased;
            () = &mut shutdown => break,
            Some(joined) = tasks.join_next_with_id(), if !tasks.is_empty() => {
                let (id, action) = match joined {
                    Ok((id, action)) => (id, action),
                    Err(error) => {
                        tracing::error!(%error, "a reconcile task ended without a result");
                        (error.id(), Action::requeue(AFTER_LOST_TASK))
                    }
                };
                if let Some(key) = keys.remove(&id) {
                    queue.done(&key);
                    let now = Instant::now();
                    // A delay too long to add to a clock reading means never.
                    if let Action::RequeueAfter(after) = action
                        && let Some(at) = now.checked_add(after)
                    {
                        queue.add_at(key, at, now);
                    }
                }
            }
            trigger = triggers.next() => match trigger {
                Some(key) => queue.add(Arc::new(key)),
                None => break,
            },
            // A closed writer means the watch ended; the triggers end with it.
            _ = &mut cache_ready, if !ready => ready = true,
            () = &mut requeue_timer, if next_due.is_some() => {}
        }
    }
    metrics.depth.dec_by(depth_shown);
    // Graceful: no new reconciles; the ones in flight finish.
    while tasks.join_next().await.is_some() {}
}

/// How many reconciles may run at once, and where the queue reports.
pub struct Workers {
    /// 0: no limit.
    pub concurrency: u16,
    pub metrics: QueueMetrics,
    /// Told `namespace/name` of a key whose object is gone, so per-object state kept
    /// elsewhere (the reconcile's failure count) goes with it.
    pub forget: Option<Forget>,
}

/// What a work queue calls with `namespace/name` when an object is gone.
pub type Forget = Arc<dyn Fn(&str) + Send + Sync>;

#[cfg(test)]
mod tests {
    use super::*;
    use futures::channel::mpsc;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::runtime::reflector::{self, store::Writer};
    use kube::runtime::watcher::Event;
    use std::sync::Mutex;
    use tokio::sync::Notify;

    /// What the fake reconcile saw: each start and end, in order.
    #[derive(Default)]
    struct Log {
        entries: Mutex<Vec<String>>,
        /// Reconciles wait on this when `hold` is set.
        release: Notify,
        hold: std::sync::atomic::AtomicBool,
        next: Mutex<HashMap<String, Action>>,
    }

    impl Log {
        fn push(&self, entry: String) {
            self.entries.lock().expect("log").push(entry);
        }
        fn entries(&self) -> Vec<String> {
            self.entries.lock().expect("log").clone()
        }
    }

    fn map(name: &str) -> ConfigMap {
        let mut map = ConfigMap::default();
        map.metadata.name = Some(name.to_owned());
        map.metadata.namespace = Some("ns".to_owned());
        map
    }

    fn key(name: &str) -> ObjectRef<ConfigMap> {
        ObjectRef::from_obj(&map(name))
    }

    fn filled(names: &[&str]) -> (Store<ConfigMap>, Writer<ConfigMap>) {
        let (store, mut writer) = reflector::store();
        writer.apply_watcher_event(&Event::Init);
        for name in names {
            writer.apply_watcher_event(&Event::InitApply(map(name)));
        }
        writer.apply_watcher_event(&Event::InitDone);
        (store, writer)
    }

    #[derive(Debug)]
    struct Failed;

    fn start(
        log: Arc<Log>,
        store: Store<ConfigMap>,
        concurrency: u16,
    ) -> (
        mpsc::UnboundedSender<ObjectRef<ConfigMap>>,
        tokio::sync::oneshot::Sender<()>,
        tokio::task::JoinHandle<()>,
    ) {
        start_with(log, store, concurrency, QueueMetrics::default())
    }

    fn start_with(
        log: Arc<Log>,
        store: Store<ConfigMap>,
        concurrency: u16,
        metrics: QueueMetrics,
    ) -> (
        mpsc::UnboundedSender<ObjectRef<ConfigMap>>,
        tokio::sync::oneshot::Sender<()>,
        tokio::task::JoinHandle<()>,
    ) {
        let (send, triggers) = mpsc::unbounded();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let reconcile = |map: Arc<ConfigMap>, log: Arc<Log>| async move {
            let name = map.metadata.name.clone().unwrap_or_default();
            log.push(format!("start {name}"));
            if log.hold.load(std::sync::atomic::Ordering::SeqCst) {
                log.release.notified().await;
            }
            log.push(format!("end {name}"));
            let next = log.next.lock().expect("next").get(&name).copied();
            match next {
                Some(action) => Ok(action),
                None => Err(Failed),
            }
        };
        let error_policy = |_: Arc<ConfigMap>, _: &Failed, _: Arc<Log>| Action::await_change();
        let forgotten = log.clone();
        let task = tokio::spawn(run(
            triggers,
            store,
            reconcile,
            error_policy,
            log,
            Workers {
                concurrency,
                metrics,
                forget: Some(Arc::new(move |key: &str| {
                    forgotten.push(format!("forget {key}"));
                })),
            },
            async {
                let _ = stopped.await;
            },
        ));
        (send, stop, task)
    }

    async fn settle() {
        for _ in 0..20 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_trigger_during_a_reconcile_runs_once_more_after_it() {
        let log = Arc::new(Log::default());
        log.hold.store(true, std::sync::atomic::Ordering::SeqCst);
        log.next
            .lock()
            .expect("next")
            .insert("a".into(), Action::await_change());
        let (store, _writer) = filled(&["a"]);
        let (send, _stop, _task) = start(log.clone(), store, 4);
        send.unbounded_send(key("a")).expect("send");
        settle().await;
        send.unbounded_send(key("a")).expect("send");
        send.unbounded_send(key("a")).expect("send");
        settle().await;
        assert_eq!(log.entries(), ["start a"], "never two at once");
        log.hold.store(false, std::sync::atomic::Ordering::SeqCst);
        log.release.notify_one();
        settle().await;
        assert_eq!(log.entries(), ["start a", "end a", "start a", "end a"]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_requeue_runs_after_its_delay_and_an_error_follows_the_policy() {
        let log = Arc::new(Log::default());
        log.next
            .lock()
            .expect("next")
            .insert("a".into(), Action::requeue(Duration::from_secs(30)));
        let (store, _writer) = filled(&["a", "b"]);
        let (send, _stop, _task) = start(log.clone(), store, 4);
        send.unbounded_send(key("a")).expect("send");
        // "b" fails; its policy says to wait for a change.
        send.unbounded_send(key("b")).expect("send");
        settle().await;
        assert_eq!(log.entries().len(), 4);
        tokio::time::sleep(Duration::from_secs(29)).await;
        settle().await;
        assert_eq!(log.entries().len(), 4, "not before 30 s");
        tokio::time::sleep(Duration::from_secs(2)).await;
        settle().await;
        assert_eq!(log.entries()[4..], ["start a", "end a"]);
    }

    #[tokio::test(start_paused = true)]
    async fn keys_wait_for_the_cache_and_missing_objects_are_skipped() {
        let log = Arc::new(Log::default());
        log.next
            .lock()
            .expect("next")
            .insert("a".into(), Action::await_change());
        let (store, mut writer) = reflector::store();
        let (send, _stop, _task) = start(log.clone(), store, 4);
        send.unbounded_send(key("gone")).expect("send");
        send.unbounded_send(key("a")).expect("send");
        settle().await;
        assert!(log.entries().is_empty(), "the cache is not ready yet");
        writer.apply_watcher_event(&Event::Init);
        writer.apply_watcher_event(&Event::InitApply(map("a")));
        writer.apply_watcher_event(&Event::InitDone);
        settle().await;
        assert_eq!(log.entries(), ["forget ns/gone", "start a", "end a"]);
    }

    #[tokio::test(start_paused = true)]
    async fn no_more_than_the_concurrency_run_and_shutdown_waits_for_them() {
        let log = Arc::new(Log::default());
        log.hold.store(true, std::sync::atomic::Ordering::SeqCst);
        for name in ["a", "b", "c"] {
            log.next
                .lock()
                .expect("next")
                .insert(name.into(), Action::await_change());
        }
        let (store, _writer) = filled(&["a", "b", "c"]);
        let metrics = QueueMetrics::default();
        let (send, stop, task) = start_with(log.clone(), store, 2, metrics.clone());
        for name in ["a", "b", "c"] {
            send.unbounded_send(key(name)).expect("send");
        }
        settle().await;
        assert_eq!(log.entries(), ["start a", "start b"]);
        assert_eq!(metrics.depth.get(), 1, "c waits for a worker");
        stop.send(()).expect("stop");
        settle().await;
        assert!(!task.is_finished(), "two reconciles are still running");
        log.hold.store(false, std::sync::atomic::Ordering::SeqCst);
        log.release.notify_waiters();
        task.await.expect("run ends");
        assert_eq!(
            metrics.depth.get(),
            0,
            "a stopped loop leaves nothing counted"
        );
        let entries = log.entries();
        assert!(entries.contains(&"end a".to_owned()) && entries.contains(&"end b".to_owned()));
        assert!(
            !entries.contains(&"start c".to_owned()),
            "nothing new starts after shutdown"
        );
    }
}
