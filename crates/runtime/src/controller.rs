//! Runs reconciles as requests arrive: requests go into the [`WorkQueue`], each ready
//! key is looked up in the cache and reconciled on its own task, and what the reconcile
//! asks for next (a requeue, a retry after its backoff, or nothing until the next
//! change) goes back in. [`Controller`] is shaped like kube-runtime's: built from a
//! cache and its triggers, then run with a reconcile, an error policy and a context.
//!
//! This replaces kube-runtime's `Controller` loop for one reason: its scheduler passes
//! every request, even one due at once, through a timer wheel, which holds a watch
//! event for a millisecond or two before its reconcile starts. Here a watch event is
//! reconciled as soon as a worker is free; that buys the benchmark's "StatefulSet
//! ready to Running" and "create to StatefulSet" targets.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{FutureExt as _, Stream, StreamExt};
use kube::Resource;
use kube::runtime::reflector::{ObjectRef, Store};
use tokio::task::{Id, JoinError, JoinSet};
use tokio::time::Instant;

use crate::metrics::QueueMetrics;
use crate::queue::{Priority, RetryDelays, WorkQueue};

/// What a reconcile asks for next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Nothing until something changes.
    AwaitChange,
    /// Another reconcile after this long, unless a change brings one sooner.
    RequeueAfter(Duration),
    /// Another reconcile after this key's backoff, which grows with each failure in a
    /// row (see [`RetryDelays`]); for an error policy.
    Retry,
}

impl Action {
    pub fn await_change() -> Self {
        Self::AwaitChange
    }

    pub fn requeue(after: Duration) -> Self {
        Self::RequeueAfter(after)
    }

    pub fn retry() -> Self {
        Self::Retry
    }
}

/// How soon a key whose reconcile task died (a panic outside the reconcile's own
/// guard) is tried again.
const AFTER_LOST_TASK: Duration = Duration::from_secs(10);

/// Whether the requests for an object go ahead of the others; `None`: no object's do.
type HighPriority<K> = Option<Arc<dyn Fn(&K) -> bool + Send + Sync>>;

/// A reconcile loop over the objects of kind `K` that a cache holds.
pub struct Controller<K>
where
    K: Resource + 'static,
    K::DynamicType: Eq + Hash,
{
    triggers: BoxStream<'static, ObjectRef<K>>,
    store: Store<K>,
    high_priority: HighPriority<K>,
    concurrency: u16,
    metrics: QueueMetrics,
    retry: RetryDelays,
    shutdown: BoxFuture<'static, ()>,
}

impl<K> Controller<K>
where
    K: Resource + Clone + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Send + Sync,
{
    /// Reconciles the keys `triggers` yields, reading each object from `store`. Keys
    /// wait until the store has its first full list; a key not in the store (deleted
    /// since) is dropped.
    pub fn new(
        triggers: impl Stream<Item = ObjectRef<K>> + Send + 'static,
        store: Store<K>,
    ) -> Self {
        Self {
            triggers: triggers.boxed(),
            store,
            high_priority: None,
            concurrency: 0,
            metrics: QueueMetrics::default(),
            retry: RetryDelays::default(),
            shutdown: futures::future::pending().boxed(),
        }
    }

    /// Requests for objects already set up go ahead of the others (see [`Priority`]):
    /// those for an object `set_up` holds for (judged by the cached object when each is
    /// asked for), and those that come during or after an object's successful pass,
    /// which has set it up though the cache may not show it yet.
    #[must_use]
    pub fn high_priority_when(
        mut self,
        set_up: impl Fn(&K) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.high_priority = Some(Arc::new(set_up));
        self
    }

    /// At most this many reconciles at once (0, the default: no limit).
    #[must_use]
    pub fn concurrency(mut self, limit: u16) -> Self {
        self.concurrency = limit;
        self
    }

    /// Where the queue reports its depth, adds, retries, waits and work.
    #[must_use]
    pub fn metrics(mut self, metrics: QueueMetrics) -> Self {
        self.metrics = metrics;
        self
    }

    /// How long a failing key waits before its next try.
    #[must_use]
    pub fn retry_delays(mut self, retry: RetryDelays) -> Self {
        self.retry = retry;
        self
    }

    /// Stops taking keys once `shutdown` resolves; the reconciles in flight finish.
    #[must_use]
    pub fn graceful_shutdown_on(
        mut self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Self {
        self.shutdown = shutdown.boxed();
        self
    }

    /// Runs `reconcile` until shutdown or until the triggers end, then waits for the
    /// reconciles in flight. A failed reconcile's next step comes from `error_policy`.
    pub async fn run<Ctx, R, P, Fut, E>(self, reconcile: R, error_policy: P, context: Arc<Ctx>)
    where
        Ctx: Send + Sync + 'static,
        R: Fn(Arc<K>, Arc<Ctx>) -> Fut,
        P: Fn(Arc<K>, &E, Arc<Ctx>) -> Action + Send + Sync + 'static,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
        E: Send + 'static,
    {
        let Self {
            mut triggers,
            store,
            high_priority,
            concurrency,
            metrics,
            retry,
            mut shutdown,
        } = self;
        let error_policy = Arc::new(error_policy);
        let mut workers = Workers::new(usize::from(concurrency), metrics, retry, high_priority);
        let cache_ready = store.wait_until_ready();
        let mut cache_ready = std::pin::pin!(cache_ready);
        let mut ready = false;
        // One timer for the next requeue, moved when that changes rather than made anew
        // on every turn of the loop.
        let requeue_timer = tokio::time::sleep_until(Instant::now());
        let mut requeue_timer = std::pin::pin!(requeue_timer);
        loop {
            if ready {
                workers.start_ready(&store, |object| {
                    let (context, error_policy) = (context.clone(), error_policy.clone());
                    let reconciling = reconcile(object.clone(), context.clone());
                    async move {
                        match reconciling.await {
                            Ok(action) => (action, true),
                            Err(error) => (error_policy(object, &error, context), false),
                        }
                    }
                });
            }
            workers.report();
            let next_due = workers.next_due();
            if let Some(at) = next_due
                && requeue_timer.deadline() != at
            {
                requeue_timer.as_mut().reset(at);
            }
            tokio::select! {
                biased;
                () = &mut shutdown => break,
                Some(joined) = workers.tasks.join_next_with_id(), if !workers.tasks.is_empty() => {
                    workers.finish(joined, &store);
                }
                trigger = triggers.next() => match trigger {
                    Some(key) => workers.request(key, &store),
                    None => break,
                },
                // A closed writer means the watch ended; the triggers end with it.
                _ = &mut cache_ready, if !ready => ready = true,
                () = &mut requeue_timer, if next_due.is_some() => {}
            }
        }
        workers.stop().await;
    }
}

/// A finished reconcile: what comes next, and whether it succeeded.
type Outcome = (Action, bool);

/// The queue and the reconciles running from it.
struct Workers<K>
where
    K: Resource,
    K::DynamicType: Eq + Hash,
{
    limit: usize,
    metrics: QueueMetrics,
    // Several loops (one per watched namespace) may share the metrics: each adds its
    // change to the depth gauge and the adds counter.
    depth_shown: i64,
    adds_shown: u64,
    tasks: JoinSet<Outcome>,
    high_priority: HighPriority<K>,
    // Keys are shared, not copied: a key waiting for a requeue sits in several of the
    // queue's indexes at once, for each of thousands of objects.
    queue: WorkQueue<Arc<ObjectRef<K>>>,
    /// The key each task works on, and when it started.
    keys: HashMap<Id, (Arc<ObjectRef<K>>, Instant)>,
}

impl<K> Workers<K>
where
    K: Resource + Clone + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Send + Sync,
{
    fn new(
        limit: usize,
        metrics: QueueMetrics,
        retry: RetryDelays,
        high_priority: HighPriority<K>,
    ) -> Self {
        Self {
            limit,
            metrics,
            depth_shown: 0,
            adds_shown: 0,
            tasks: JoinSet::new(),
            high_priority,
            queue: WorkQueue::with_retry(retry),
            keys: HashMap::new(),
        }
    }

    /// Starts a reconcile for each ready key while workers are free; a key whose
    /// object is gone is dropped and forgotten.
    fn start_ready<F>(&mut self, store: &Store<K>, mut start: impl FnMut(Arc<K>) -> F)
    where
        F: Future<Output = Outcome> + Send + 'static,
    {
        self.queue.promote_due(Instant::now());
        while let Some((key, waited)) = self.queue.take(self.limit) {
            self.metrics.wait.observe(waited.as_secs_f64());
            self.metrics.queue_duration.observe(waited.as_secs_f64());
            let Some(object) = store.get(&key) else {
                self.queue.done(&key);
                self.queue.forget(&key);
                continue;
            };
            let started = Instant::now();
            tracing::debug!(object = %key, waited_ms = waited.as_millis(), "reconcile started");
            self.metrics.running.started(started);
            let handle = self.tasks.spawn(start(object));
            self.keys.insert(handle.id(), (key, started));
        }
    }

    /// Brings the shared depth gauge and adds counter up to this loop's queue.
    fn report(&mut self) {
        let depth = i64::try_from(self.queue.depth().0).unwrap_or(i64::MAX);
        self.metrics.depth.inc_by(depth - self.depth_shown);
        self.depth_shown = depth;
        let adds = self.queue.adds();
        self.metrics.adds.inc_by(adds - self.adds_shown);
        self.adds_shown = adds;
    }

    fn next_due(&mut self) -> Option<Instant> {
        self.queue.next_due()
    }

    /// The priority of `key`'s requests, by its object in `store` now.
    fn priority_of(&self, key: &ObjectRef<K>, store: &Store<K>) -> Priority {
        // A loop without priorities looks nothing up.
        let set_up = self
            .high_priority
            .as_ref()
            .is_some_and(|set_up| store.get(key).is_some_and(|object| set_up(&object)));
        if set_up {
            Priority::High
        } else {
            Priority::Normal
        }
    }

    /// Asks for `key` as a watch reported it.
    fn request(&mut self, key: ObjectRef<K>, store: &Store<K>) {
        let priority = self.priority_of(&key, store);
        tracing::trace!(object = %key, "requested");
        self.queue.add_with(Arc::new(key), priority);
    }

    /// Puts a finished key back as its outcome asks.
    fn finish(&mut self, joined: Result<(Id, Outcome), JoinError>, store: &Store<K>) {
        let (id, (action, succeeded)) = match joined {
            Ok(finished) => finished,
            Err(error) => {
                tracing::error!(%error, "a reconcile task ended without a result");
                (error.id(), (Action::requeue(AFTER_LOST_TASK), false))
            }
        };
        let Some(key) = self.end_work(id) else {
            return;
        };
        let priority = if succeeded && self.high_priority.is_some() {
            Priority::High
        } else {
            self.priority_of(&key, store)
        };
        self.queue.done_with(&key, priority);
        if succeeded {
            self.queue.forget(&key);
        }
        let now = Instant::now();
        match action {
            Action::AwaitChange => {}
            Action::Retry => {
                self.metrics.retries.inc();
                self.queue.add_rate_limited(key, now, priority);
            }
            // A delay too long to add to a clock reading means never.
            Action::RequeueAfter(after) => {
                if let Some(at) = now.checked_add(after) {
                    self.queue.add_at(key, at, now, priority);
                }
            }
        }
    }

    /// Records the end of task `id`'s work; returns its key.
    fn end_work(&mut self, id: Id) -> Option<Arc<ObjectRef<K>>> {
        let (key, started) = self.keys.remove(&id)?;
        let took = started.elapsed();
        tracing::debug!(object = %key, took_ms = took.as_millis(), "reconcile finished");
        self.metrics.work_duration.observe(took.as_secs_f64());
        self.metrics.running.ended(started);
        Some(key)
    }

    /// Graceful: no new reconciles; the ones in flight finish.
    async fn stop(mut self) {
        while let Some(joined) = self.tasks.join_next_with_id().await {
            let id = match joined {
                Ok((id, _)) => id,
                Err(error) => error.id(),
            };
            self.end_work(id);
        }
    }
}

impl<K> Drop for Workers<K>
where
    K: Resource,
    K::DynamicType: Eq + Hash,
{
    /// Takes this loop's share out of the shared metrics, whether it stopped or was
    /// dropped mid-run (its reconciles aborted): otherwise the depth would count its keys,
    /// and the running gauges its reconciles, for ever.
    fn drop(&mut self) {
        self.metrics.depth.dec_by(self.depth_shown);
        for (_, started) in self.keys.values() {
            self.metrics.running.ended(*started);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::channel::mpsc;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::runtime::reflector::{self, store::Writer};
    use kube::runtime::watcher::Event;
    use std::sync::Mutex;
    use tokio::sync::Notify;

    /// The count and sum of `histogram` as a scrape reads them from its text.
    fn observed(histogram: &prometheus_client::metrics::histogram::Histogram) -> (u64, f64) {
        let mut registry = prometheus_client::registry::Registry::default();
        registry.register("h", "", histogram.clone());
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encodes");
        let value = |name: &str| {
            text.lines()
                .find_map(|line| line.strip_prefix(name))
                .unwrap_or_default()
                .trim()
                .to_owned()
        };
        (
            value("h_count ").parse().expect("a count"),
            value("h_sum ").parse().expect("a sum"),
        )
    }

    /// What the fake reconcile saw: each start and end, in order.
    #[derive(Default)]
    struct Log {
        entries: Mutex<Vec<String>>,
        /// Reconciles wait on this when `hold` is set.
        release: Notify,
        hold: std::sync::atomic::AtomicBool,
        next: Mutex<HashMap<String, Action>>,
        /// The error policy asks for a retry with backoff rather than a change.
        retry_failures: std::sync::atomic::AtomicBool,
    }

    impl Log {
        fn push(&self, entry: String) {
            self.entries.lock().expect("log").push(entry);
        }
        fn entries(&self) -> Vec<String> {
            self.entries.lock().expect("log").clone()
        }
    }

    /// A log whose reconciles wait to be released, and of `names` end awaiting a change.
    fn held_log_settling(names: &[&str]) -> Arc<Log> {
        let log = Arc::new(Log::default());
        log.hold.store(true, std::sync::atomic::Ordering::SeqCst);
        for name in names {
            log.next
                .lock()
                .expect("next")
                .insert((*name).into(), Action::await_change());
        }
        log
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
        let error_policy = |_: Arc<ConfigMap>, _: &Failed, log: Arc<Log>| {
            if log.retry_failures.load(std::sync::atomic::Ordering::SeqCst) {
                Action::retry()
            } else {
                Action::await_change()
            }
        };
        let hot = |map: &ConfigMap| {
            map.metadata
                .name
                .as_deref()
                .is_some_and(|name| name.starts_with("hot"))
        };
        let controller = Controller::new(triggers, store)
            .high_priority_when(hot)
            .concurrency(concurrency)
            .metrics(metrics)
            .graceful_shutdown_on(async {
                let _ = stopped.await;
            });
        let task = tokio::spawn(controller.run(reconcile, error_policy, log));
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
    async fn a_failing_key_is_retried_after_a_backoff_that_doubles() {
        let log = Arc::new(Log::default());
        log.retry_failures
            .store(true, std::sync::atomic::Ordering::SeqCst);
        let (store, _writer) = filled(&["a"]);
        let (send, _stop, _task) = start(log.clone(), store, 4);
        send.unbounded_send(key("a")).expect("send");
        let mut runs_by_second = Vec::new();
        for _ in 0..8 {
            settle().await;
            runs_by_second.push(log.entries().len() / 2);
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        // Failures at 0 s, then 1 s, 2 s and 4 s later: at 0, 1, 3 and 7 s.
        assert_eq!(runs_by_second, [1, 2, 2, 3, 3, 3, 3, 4]);
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
        assert_eq!(
            log.entries(),
            ["start a", "end a"],
            "the missing key is dropped"
        );
    }

    /// Whether two readings in seconds are the same, to well below a paused clock's step.
    fn same_seconds(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-6
    }

    #[tokio::test(start_paused = true)]
    async fn the_queue_reports_adds_retries_work_and_depth_as_client_go_does() {
        let log = Arc::new(Log::default());
        log.hold.store(true, std::sync::atomic::Ordering::SeqCst);
        log.retry_failures
            .store(true, std::sync::atomic::Ordering::SeqCst);
        // "a" succeeds; "b" fails each time and is retried after its backoff.
        log.next
            .lock()
            .expect("next")
            .insert("a".into(), Action::await_change());
        let (store, _writer) = filled(&["a", "b"]);
        let metrics = QueueMetrics::default();
        let (send, _stop, _task) = start_with(log.clone(), store, 1, metrics.clone());
        send.unbounded_send(key("a")).expect("send");
        settle().await;
        for name in ["b", "a", "b"] {
            send.unbounded_send(key(name)).expect("send");
        }
        settle().await;
        assert_eq!(log.entries(), ["start a"]);
        assert_eq!(metrics.depth.get(), 1, "b waits for the one worker");
        assert_eq!(
            metrics.adds.get(),
            3,
            "a, b, and a again while it runs; b was already waiting"
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
        let now = Instant::now();
        assert!(same_seconds(metrics.running.longest_seconds(now), 2.0));
        assert!(same_seconds(metrics.running.unfinished_seconds(now), 2.0));

        log.hold.store(false, std::sync::atomic::Ordering::SeqCst);
        log.release.notify_one();
        settle().await;
        // a, then b (fails), then a again for the request that came while it ran.
        assert_eq!(log.entries().len(), 6);
        assert_eq!(observed(&metrics.work_duration).0, 3);
        assert!(same_seconds(observed(&metrics.work_duration).1, 2.0));
        assert_eq!(observed(&metrics.queue_duration).0, 3);
        assert_eq!(metrics.retries.get(), 1);
        assert_eq!(metrics.adds.get(), 3, "the retry is not due yet");
        assert_eq!(metrics.depth.get(), 0);
        assert!(same_seconds(
            metrics.running.longest_seconds(Instant::now()),
            0.0
        ));

        tokio::time::sleep(Duration::from_secs(1)).await;
        settle().await;
        assert_eq!(log.entries()[6..], ["start b", "end b"]);
        assert_eq!(metrics.adds.get(), 4, "the retry fell due");
        assert_eq!(metrics.retries.get(), 2);
        assert_eq!(observed(&metrics.work_duration).0, 4);
    }

    #[tokio::test(start_paused = true)]
    async fn no_more_than_the_concurrency_run_and_shutdown_waits_for_them() {
        let log = held_log_settling(&["a", "b", "c"]);
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
        assert_eq!(
            observed(&metrics.work_duration).0,
            2,
            "drained reconciles count"
        );
        assert!(same_seconds(
            metrics.running.unfinished_seconds(Instant::now()),
            0.0
        ));
        let entries = log.entries();
        assert!(entries.contains(&"end a".to_owned()) && entries.contains(&"end b".to_owned()));
        assert!(
            !entries.contains(&"start c".to_owned()),
            "nothing new starts after shutdown"
        );
    }

    /// One worker: `a` starts and is held, `then` are asked for in turn while it runs,
    /// and two reconciles are let through. What the log shows after.
    async fn asked_while_a_runs(then: [&str; 2]) -> Vec<String> {
        let log = held_log_settling(&["a", "b", "hot"]);
        let (store, _writer) = filled(&["a", "b", "hot"]);
        let (send, _stop, _task) = start(log.clone(), store, 1);
        send.unbounded_send(key("a")).expect("send");
        settle().await;
        assert_eq!(log.entries(), ["start a"]);
        for name in then {
            send.unbounded_send(key(name)).expect("send");
        }
        settle().await;
        for _ in 0..2 {
            log.release.notify_waiters();
            settle().await;
        }
        log.entries()
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_during_a_successful_pass_comes_back_ahead_of_new_objects() {
        // b is new; a's request comes while its first pass runs.
        assert_eq!(
            asked_while_a_runs(["b", "a"]).await,
            ["start a", "end a", "start a", "end a", "start b"]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_for_a_high_priority_object_goes_ahead_of_waiting_ones() {
        assert_eq!(
            asked_while_a_runs(["b", "hot"]).await,
            ["start a", "end a", "start hot", "end hot", "start b"],
            "hot was asked for after b"
        );
    }
}
