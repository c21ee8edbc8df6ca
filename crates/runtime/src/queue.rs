//! The work queue between the watches and the reconciles. It has the semantics of
//! client-go's workqueue: a key waits at most once, a key is never reconciled twice at
//! the same time, a request that arrives while its key runs is kept and runs right
//! after, and a requeue for later gives way to an earlier request.
//!
//! A request due now goes straight to a ready list. Timers are only for requeues;
//! a watch event never waits for one. kube-runtime's scheduler passes every request,
//! even one due at once, through a timer wheel that holds it a millisecond or two:
//! this queue buys the "StatefulSet ready to Running" and "create to StatefulSet"
//! benchmark targets.
//!
//! There are two ready lists, as in controller-runtime's priority queue: a request of
//! [`Priority::High`] goes ahead of every [`Priority::Normal`] one, so the follow-up
//! passes of objects already set up do not wait behind the first passes of a burst of
//! new ones. A request raised to high while it waits moves up, keeping its wait time.
//!
//! Failures are counted here too, as client-go's rate-limited add and forget do: a key
//! that keeps failing waits longer each time, and one that succeeds or goes away is
//! forgotten.

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, HashMap, HashSet, VecDeque};
use std::hash::Hash;
use std::time::Duration;

use tokio::time::Instant;

/// Which ready list a request joins.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum Priority {
    #[default]
    Normal,
    High,
}

/// After this many high-priority keys in a row while normal ones wait, one normal key
/// is taken: a steady stream of high-priority requests cannot starve the others.
const HIGH_IN_A_ROW: u32 = 8;

#[derive(Debug)]
pub struct WorkQueue<K> {
    /// Keys due now, oldest first, one list per priority. An entry whose ticket no
    /// longer matches `queued` was moved up or taken, and is skipped.
    high: VecDeque<(K, u64)>,
    normal: VecDeque<(K, u64)>,
    /// The keys on a ready list: their priority, ticket and when each became due.
    queued: HashMap<K, Queued>,
    /// The last ticket given.
    tickets: u64,
    /// High-priority keys taken in a row while normal ones waited.
    high_in_row: u32,
    /// Keys being reconciled.
    running: HashSet<K>,
    /// Running keys asked for again while they ran, with the highest priority asked.
    again: HashMap<K, Priority>,
    /// Keys waiting for a time, with the time that counts and their priority then.
    later: HashMap<K, (Instant, Priority)>,
    /// The times in `later`, soonest on top. An entry whose time no longer matches
    /// `later` has been superseded and is skipped.
    timers: BinaryHeap<Reverse<Timer<K>>>,
    /// Consecutive failures of the keys that failed last time.
    failures: HashMap<K, u32>,
    retry: RetryDelays,
    /// Keys that started waiting, ever: client-go's `adds`.
    adds: u64,
}

#[derive(Debug, Clone, Copy)]
struct Queued {
    priority: Priority,
    ticket: u64,
    since: Instant,
}

/// How long a failing key waits: `first` after one failure, doubling per failure in a
/// row up to `max`.
#[derive(Debug, Clone, Copy)]
pub struct RetryDelays {
    pub first: Duration,
    pub max: Duration,
}

impl Default for RetryDelays {
    /// client-go's per-item default starts at 5 ms; a reconcile that failed against the
    /// API server rarely succeeds that soon, so this starts at 1 s and stops at 5 min.
    fn default() -> Self {
        Self {
            first: Duration::from_secs(1),
            max: Duration::from_secs(300),
        }
    }
}

impl RetryDelays {
    /// The wait after `failures` failures in a row.
    pub fn after(&self, failures: u32) -> Duration {
        let exponent = failures.saturating_sub(1).min(24);
        self.first.saturating_mul(1 << exponent).min(self.max)
    }
}

#[derive(Debug)]
struct Timer<K> {
    at: Instant,
    key: K,
}

impl<K> PartialEq for Timer<K> {
    fn eq(&self, other: &Self) -> bool {
        self.at == other.at
    }
}
impl<K> Eq for Timer<K> {}
impl<K> PartialOrd for Timer<K> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<K> Ord for Timer<K> {
    fn cmp(&self, other: &Self) -> Ordering {
        self.at.cmp(&other.at)
    }
}

impl<K> Default for WorkQueue<K> {
    fn default() -> Self {
        Self {
            high: VecDeque::new(),
            normal: VecDeque::new(),
            queued: HashMap::new(),
            tickets: 0,
            high_in_row: 0,
            running: HashSet::new(),
            again: HashMap::new(),
            later: HashMap::new(),
            timers: BinaryHeap::new(),
            failures: HashMap::new(),
            retry: RetryDelays::default(),
            adds: 0,
        }
    }
}

impl<K: Hash + Eq + Clone> WorkQueue<K> {
    /// A queue whose failing keys wait as `retry` says.
    pub fn with_retry(retry: RetryDelays) -> Self {
        Self {
            retry,
            ..Self::default()
        }
    }

    /// Counts one more failure of `key` and asks for it again after its retry delay,
    /// at `priority`; returns that delay.
    pub fn add_rate_limited(&mut self, key: K, now: Instant, priority: Priority) -> Duration {
        let failures = self.failures.entry(key.clone()).or_default();
        *failures = failures.saturating_add(1);
        let delay = self.retry.after(*failures);
        if let Some(at) = now.checked_add(delay) {
            self.add_at(key, at, now, priority);
        }
        delay
    }

    /// Forgets the failures of `key`: it succeeded, or its object is gone.
    pub fn forget(&mut self, key: &K) {
        self.failures.remove(key);
    }

    /// Asks for `key` to be reconciled as soon as possible, at normal priority.
    pub fn add(&mut self, key: K) {
        self.add_with(key, Priority::Normal);
    }

    /// Asks for `key` to be reconciled as soon as possible, at `priority`; a key already
    /// waiting at a lower one moves up.
    pub fn add_with(&mut self, key: K, priority: Priority) {
        if self.running.contains(&key) {
            if let Some(asked) = self.again.get_mut(&key) {
                *asked = (*asked).max(priority);
            } else {
                self.adds += 1;
                self.again.insert(key, priority);
            }
        } else if let Some(queued) = self.queued.get(&key) {
            if queued.priority < priority {
                let since = queued.since;
                self.make_ready(key, priority, since);
            }
        } else {
            self.adds += 1;
            self.make_ready(key, priority, Instant::now());
        }
    }

    /// Puts `key`, which does not run, on the ready list of `priority`, as due since
    /// `since`.
    fn make_ready(&mut self, key: K, priority: Priority, since: Instant) {
        self.later.remove(&key);
        self.tickets += 1;
        let ticket = self.tickets;
        self.queued.insert(
            key.clone(),
            Queued {
                priority,
                ticket,
                since,
            },
        );
        match priority {
            Priority::High => self.high.push_back((key, ticket)),
            Priority::Normal => self.normal.push_back((key, ticket)),
        }
    }

    /// Asks for `key` to be reconciled at `at`, at `priority`, unless it is asked for
    /// sooner already.
    pub fn add_at(&mut self, key: K, at: Instant, now: Instant, priority: Priority) {
        if at <= now {
            self.add_with(key, priority);
            return;
        }
        if self.queued.contains_key(&key) || self.again.contains_key(&key) {
            return;
        }
        if let Some((current, asked)) = self.later.get_mut(&key)
            && *current <= at
        {
            *asked = (*asked).max(priority);
            return;
        }
        self.later.insert(key.clone(), (at, priority));
        self.timers.push(Reverse(Timer { at, key }));
    }

    /// Moves the keys whose time has come to their ready list.
    pub fn promote_due(&mut self, now: Instant) {
        while let Some(Reverse(timer)) = self.timers.peek() {
            if timer.at > now {
                break;
            }
            let Some(Reverse(Timer { at, key })) = self.timers.pop() else {
                break;
            };
            if let Some(&(due, priority)) = self.later.get(&key)
                && due == at
            {
                self.add_with(key, priority);
            }
        }
    }

    /// When the next requeue falls due, if any is waiting.
    pub fn next_due(&mut self) -> Option<Instant> {
        // Drop superseded timers on top so the answer is the real next time.
        while let Some(Reverse(timer)) = self.timers.peek() {
            if self.later.get(&timer.key).map(|(at, _)| at) == Some(&timer.at) {
                return Some(timer.at);
            }
            self.timers.pop();
        }
        None
    }

    /// Takes the next ready key, high priority first, and marks it running, if fewer
    /// than `limit` keys run (0: no limit); with how long it waited since it became due.
    pub fn take(&mut self, limit: usize) -> Option<(K, Duration)> {
        if limit != 0 && self.running.len() >= limit {
            return None;
        }
        let queued = &self.queued;
        let current =
            |(key, ticket): &(K, u64)| queued.get(key).is_some_and(|q| q.ticket == *ticket);
        while self.high.front().is_some_and(|entry| !current(entry)) {
            self.high.pop_front();
        }
        while self.normal.front().is_some_and(|entry| !current(entry)) {
            self.normal.pop_front();
        }
        let normal_waits = !self.normal.is_empty();
        let (key, _) =
            if !self.high.is_empty() && (self.high_in_row < HIGH_IN_A_ROW || !normal_waits) {
                self.high_in_row = if normal_waits {
                    self.high_in_row + 1
                } else {
                    0
                };
                self.high.pop_front()?
            } else {
                self.high_in_row = 0;
                self.normal.pop_front()?
            };
        let queued = self.queued.remove(&key)?;
        self.running.insert(key.clone());
        Some((key, queued.since.elapsed()))
    }

    /// Marks `key` done; a request that came while it ran makes it ready again (that
    /// request was counted as an add when it came, as client-go counts it).
    pub fn done(&mut self, key: &K) {
        self.done_with(key, Priority::Normal);
    }

    /// Marks `key` done as [`WorkQueue::done`] does; a request that came while it ran
    /// comes back at `at_least` if that is higher than the priority it was asked at.
    pub fn done_with(&mut self, key: &K, at_least: Priority) {
        self.running.remove(key);
        if let Some(priority) = self.again.remove(key) {
            self.make_ready(key.clone(), priority.max(at_least), Instant::now());
        }
    }

    /// How many keys are being reconciled.
    #[cfg(test)]
    fn running(&self) -> usize {
        self.running.len()
    }

    /// How many keys are ready and how many wait for a time.
    pub fn depth(&self) -> (usize, usize) {
        (self.queued.len(), self.later.len())
    }

    /// How many times a key started waiting, as client-go's workqueue counts adds: a
    /// request for a key already waiting is not counted, and a requeue or retry is
    /// counted when it falls due.
    pub fn adds(&self) -> u64 {
        self.adds
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    fn key_of(taken: Option<(&'static str, Duration)>) -> Option<&'static str> {
        taken.map(|(key, _)| key)
    }

    fn drain(queue: &mut WorkQueue<&'static str>) -> Vec<&'static str> {
        let mut taken = Vec::new();
        while let Some((key, _)) = queue.take(0) {
            taken.push(key);
        }
        taken
    }

    #[test]
    fn a_key_waits_once_and_keys_come_out_in_order() {
        let mut queue = WorkQueue::default();
        queue.add("a");
        queue.add("b");
        queue.add("a");
        assert_eq!(drain(&mut queue), ["a", "b"]);
        assert_eq!(key_of(queue.take(0)), None);
    }

    #[test]
    fn a_key_asked_for_while_it_runs_runs_again_after_and_not_beside() {
        let mut queue = WorkQueue::default();
        queue.add("a");
        assert_eq!(key_of(queue.take(0)), Some("a"));
        queue.add("a");
        queue.add("a");
        assert_eq!(key_of(queue.take(0)), None, "must not run twice at once");
        queue.done(&"a");
        assert_eq!(key_of(queue.take(0)), Some("a"));
        queue.done(&"a");
        assert_eq!(key_of(queue.take(0)), None, "the two requests were one");
    }

    #[tokio::test(start_paused = true)]
    async fn a_taken_key_tells_how_long_it_waited() {
        let mut queue = WorkQueue::default();
        queue.add("a");
        tokio::time::advance(Duration::from_millis(7)).await;
        assert_eq!(queue.take(0), Some(("a", Duration::from_millis(7))));
    }

    #[test]
    fn no_more_than_the_limit_run_at_once() {
        let mut queue = WorkQueue::default();
        for key in ["a", "b", "c"] {
            queue.add(key);
        }
        assert_eq!(key_of(queue.take(2)), Some("a"));
        assert_eq!(key_of(queue.take(2)), Some("b"));
        assert_eq!(key_of(queue.take(2)), None);
        assert_eq!(queue.running(), 2);
        queue.done(&"a");
        assert_eq!(key_of(queue.take(2)), Some("c"));
    }

    #[test]
    fn a_requeue_waits_for_its_time() {
        let now = Instant::now();
        let mut queue = WorkQueue::default();
        queue.add_at("a", now + secs(5), now, Priority::Normal);
        assert_eq!(queue.next_due(), Some(now + secs(5)));
        queue.promote_due(now + secs(4));
        assert_eq!(key_of(queue.take(0)), None);
        queue.promote_due(now + secs(5));
        assert_eq!(key_of(queue.take(0)), Some("a"));
        assert_eq!(queue.next_due(), None);
    }

    #[test]
    fn a_request_due_now_does_not_wait_for_a_timer() {
        let now = Instant::now();
        let mut queue = WorkQueue::default();
        queue.add_at("a", now, now, Priority::Normal);
        assert_eq!(key_of(queue.take(0)), Some("a"));
        assert_eq!(queue.next_due(), None);
    }

    #[test]
    fn the_earlier_of_two_times_counts() {
        let now = Instant::now();
        let mut queue = WorkQueue::default();
        queue.add_at("a", now + secs(30), now, Priority::Normal);
        queue.add_at("a", now + secs(2), now, Priority::Normal);
        queue.add_at("a", now + secs(10), now, Priority::Normal);
        assert_eq!(queue.next_due(), Some(now + secs(2)));
        queue.promote_due(now + secs(2));
        assert_eq!(drain(&mut queue), ["a"]);
        // The superseded 10 s and 30 s timers bring nothing back.
        queue.done(&"a");
        queue.promote_due(now + secs(60));
        assert_eq!(key_of(queue.take(0)), None);
        assert_eq!(queue.next_due(), None);
    }

    #[test]
    fn a_request_now_replaces_a_requeue_for_later() {
        let now = Instant::now();
        let mut queue = WorkQueue::default();
        queue.add_at("a", now + secs(30), now, Priority::Normal);
        queue.add("a");
        assert_eq!(key_of(queue.take(0)), Some("a"));
        queue.done(&"a");
        queue.promote_due(now + secs(30));
        assert_eq!(
            queue.take(0),
            None,
            "the requeue was used up by the earlier run"
        );
        assert_eq!(queue.depth(), (0, 0));
    }

    #[test]
    fn a_failing_key_waits_twice_as_long_each_time_until_forgotten() {
        let now = Instant::now();
        let mut queue = WorkQueue::with_retry(RetryDelays {
            first: secs(1),
            max: secs(5),
        });
        let delays: Vec<Duration> = (0..5)
            .map(|_| queue.add_rate_limited("a", now, Priority::Normal))
            .collect();
        assert_eq!(delays, [secs(1), secs(2), secs(4), secs(5), secs(5)]);
        assert_eq!(
            queue.next_due(),
            Some(now + secs(1)),
            "the earliest time counts"
        );
        queue.forget(&"a");
        assert_eq!(queue.add_rate_limited("a", now, Priority::Normal), secs(1));
        assert_eq!(
            queue.add_rate_limited("b", now, Priority::Normal),
            secs(1),
            "each key counts alone"
        );
    }

    #[test]
    fn adds_count_each_time_a_key_starts_waiting_and_not_repeats() {
        let now = Instant::now();
        let mut queue = WorkQueue::default();
        queue.add("a");
        queue.add("a");
        assert_eq!(queue.adds(), 1, "a request for a waiting key is not an add");
        assert_eq!(key_of(queue.take(0)), Some("a"));
        queue.add("a");
        queue.add("a");
        assert_eq!(queue.adds(), 2, "one request kept while it runs");
        queue.done(&"a");
        assert_eq!(queue.adds(), 2, "running it again is not another add");
        assert_eq!(key_of(queue.take(0)), Some("a"));
        queue.done(&"a");
        queue.add_rate_limited("a", now, Priority::Normal);
        assert_eq!(queue.adds(), 2, "a retry is counted when it falls due");
        queue.promote_due(now + secs(1));
        assert_eq!(queue.adds(), 3);
    }

    #[test]
    fn a_requeue_set_while_a_key_runs_waits_for_its_time_after() {
        let now = Instant::now();
        let mut queue = WorkQueue::default();
        queue.add("a");
        assert_eq!(key_of(queue.take(0)), Some("a"));
        queue.add_at("a", now + secs(5), now, Priority::Normal);
        queue.done(&"a");
        assert_eq!(key_of(queue.take(0)), None);
        queue.promote_due(now + secs(5));
        assert_eq!(key_of(queue.take(0)), Some("a"));
    }

    #[test]
    fn high_priority_keys_go_ahead_of_normal_ones() {
        let mut queue = WorkQueue::default();
        queue.add("a");
        queue.add("b");
        queue.add_with("c", Priority::High);
        queue.add_with("d", Priority::High);
        assert_eq!(drain(&mut queue), ["c", "d", "a", "b"]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiting_key_raised_to_high_moves_up_once_and_keeps_its_wait() {
        let mut queue = WorkQueue::default();
        queue.add("a");
        queue.add("b");
        tokio::time::advance(Duration::from_millis(5)).await;
        queue.add_with("b", Priority::High);
        queue.add("b");
        assert_eq!(queue.depth(), (2, 0));
        assert_eq!(queue.take(0), Some(("b", Duration::from_millis(5))));
        assert_eq!(drain(&mut queue), ["a"], "b's normal place is gone");
        assert_eq!(queue.adds(), 2, "moving up is not another add");
    }

    #[test]
    fn a_key_asked_for_while_it_runs_comes_back_at_the_highest_priority_asked() {
        let mut queue = WorkQueue::default();
        queue.add("a");
        assert_eq!(key_of(queue.take(0)), Some("a"));
        queue.add_with("a", Priority::High);
        queue.add("a");
        queue.add("b");
        queue.done(&"a");
        assert_eq!(drain(&mut queue), ["a", "b"]);
    }

    #[test]
    fn a_key_done_can_raise_the_request_that_came_while_it_ran() {
        let mut queue = WorkQueue::default();
        queue.add("a");
        assert_eq!(key_of(queue.take(0)), Some("a"));
        queue.add("a");
        queue.add("b");
        queue.done_with(&"a", Priority::High);
        assert_eq!(drain(&mut queue), ["a", "b"]);
        queue.done_with(&"a", Priority::High);
        assert_eq!(queue.depth(), (0, 0), "no request came while it ran");
    }

    #[test]
    fn a_requeue_keeps_its_priority_until_it_falls_due() {
        let now = Instant::now();
        let mut queue = WorkQueue::default();
        queue.add_at("a", now + secs(5), now, Priority::High);
        queue.add("b");
        queue.promote_due(now + secs(5));
        assert_eq!(drain(&mut queue), ["a", "b"]);
    }

    #[test]
    fn a_stream_of_high_priority_keys_lets_a_normal_one_through_now_and_then() {
        let mut queue = WorkQueue::default();
        queue.add("new");
        let high = ["h0", "h1", "h2", "h3", "h4", "h5", "h6", "h7", "h8", "h9"];
        for key in high {
            queue.add_with(key, Priority::High);
        }
        let order = drain(&mut queue);
        assert_eq!(
            order.iter().position(|key| *key == "new"),
            Some(8),
            "{order:?}"
        );
        assert_eq!(order.len(), 11);
    }
}
