//! Replay logs for resumable SSE streams (MCP 2025-11-25 "Resumability and Redelivery").
//!
//! Every SSE stream the front opens for a session has a log: the messages sent on it,
//! each with a sequence number. Event ids are `"{stream}:{seq}"`, unique across the
//! session's streams and naming the stream they belong to, so a client that reconnects
//! with `Last-Event-ID` gets what followed on *that* stream only. Stream 0 is the
//! standalone (GET) stream; request streams are numbered from 1. A log keeps at most
//! `cap` events and `max_bytes` bytes of them (the oldest go first; the newest event is
//! kept whatever its size); a session keeps the logs of its last few finished request
//! streams. Everything is dropped with the session.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use tokio::sync::Notify;

/// The log of one SSE stream.
#[derive(Debug)]
pub struct EventLog {
    stream: u32,
    /// Counts events that fell out of the log (`mcpgate_replay_dropped_total`).
    dropped: prometheus_client::metrics::counter::Counter,
    /// Counts events a reader never got because they fell out before it read them
    /// (`mcpgate_backlog_dropped_total`).
    lost: prometheus_client::metrics::counter::Counter,
    inner: Mutex<LogInner>,
    changed: Notify,
}

#[derive(Debug)]
struct LogInner {
    events: VecDeque<(u64, Bytes)>,
    /// Bytes of `events`.
    bytes: usize,
    next: u64,
    done: bool,
    cap: Bounds,
}

/// How much a buffer of messages holds: at most `events` of them and (apart from the
/// newest one) `bytes` of them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bounds {
    pub(crate) events: usize,
    pub(crate) bytes: usize,
}

impl Bounds {
    /// Whether a buffer holding `n` messages of `bytes` in all must drop its oldest before
    /// taking one of `more` bytes.
    pub(crate) fn full(&self, n: usize, bytes: usize, more: usize) -> bool {
        n > 0 && (n >= self.events.max(1) || bytes + more > self.bytes)
    }
}

impl EventLog {
    fn new(stream: u32, cap: Bounds, counters: Counters) -> Self {
        EventLog {
            stream,
            dropped: counters.0,
            lost: counters.1,
            inner: Mutex::new(LogInner {
                events: VecDeque::new(),
                bytes: 0,
                next: 1,
                done: false,
                cap,
            }),
            changed: Notify::new(),
        }
    }

    /// The stream number.
    pub fn stream(&self) -> u32 {
        self.stream
    }

    /// The SSE event id of event `seq` of this stream.
    pub fn event_id(&self, seq: u64) -> String {
        format!("{}:{seq}", self.stream)
    }

    /// Appends a message; returns its sequence number.
    pub fn push(&self, data: Bytes) -> u64 {
        let seq = match self.inner.lock() {
            Ok(mut l) => {
                let seq = l.next;
                l.next += 1;
                while l.cap.full(l.events.len(), l.bytes, data.len()) {
                    if let Some((_, old)) = l.events.pop_front() {
                        l.bytes -= old.len();
                    }
                    self.dropped.inc();
                }
                l.bytes += data.len();
                l.events.push_back((seq, data));
                seq
            }
            Err(_) => 0,
        };
        self.changed.notify_waiters();
        seq
    }

    /// A reader skipped `n` events that had fallen out of the log before it read them
    /// (a client reading more slowly than the upstream writes): they are lost for it, and
    /// counted.
    pub fn reader_lost(&self, n: u64) {
        self.lost.inc_by(n);
    }

    /// Marks the stream complete: readers end after the last event.
    pub fn finish(&self) {
        if let Ok(mut l) = self.inner.lock() {
            l.done = true;
        }
        self.changed.notify_waiters();
    }

    /// Whether the stream is complete.
    pub fn is_done(&self) -> bool {
        self.inner.lock().map_or(true, |l| l.done)
    }

    /// The sequence number of the last event pushed (0 before the first).
    pub fn last_seq(&self) -> u64 {
        self.inner.lock().map_or(0, |l| l.next - 1)
    }

    /// The first event with a sequence number ≥ `from` that is already in the log.
    pub fn next_ready_from(&self, from: u64) -> Option<(u64, Bytes)> {
        let l = self.inner.lock().ok()?;
        l.events.iter().find(|(s, _)| *s >= from).cloned()
    }

    /// The first event with a sequence number ≥ `from`, waiting for one; `None` once the
    /// stream is complete and nothing is left. Events that fell out of the log are
    /// skipped.
    pub async fn next_from(&self, from: u64) -> Option<(u64, Bytes)> {
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let l = self.inner.lock().ok()?;
                if let Some((seq, data)) = l.events.iter().find(|(s, _)| *s >= from) {
                    return Some((*seq, data.clone()));
                }
                if l.done {
                    return None;
                }
            }
            notified.await;
        }
    }
}

/// Parses an event id into (stream, seq).
pub fn parse_event_id(id: &str) -> Option<(u32, u64)> {
    let (s, q) = id.trim().split_once(':')?;
    Some((s.parse().ok()?, q.parse().ok()?))
}

/// A session's logs.
#[derive(Debug)]
pub(crate) struct Logs {
    next: u32,
    map: HashMap<u32, Arc<EventLog>>,
    order: VecDeque<u32>,
    cap: Bounds,
    keep: usize,
    counters: Counters,
}

/// (events dropped from a full log, events a reader lost).
pub(crate) type Counters = (
    prometheus_client::metrics::counter::Counter,
    prometheus_client::metrics::counter::Counter,
);

impl Logs {
    pub(crate) fn new(cap: Bounds, keep: usize, counters: Counters) -> Self {
        // Request streams are numbered from a random start, so a sealed session's client
        // that resumes a stream of one replica on another (which keeps its own logs of the
        // same session) names no stream there rather than one of that replica's.
        let mut b = [0u8; 4];
        let start = match getrandom::fill(&mut b) {
            Ok(()) => (u32::from_le_bytes(b) >> 1).max(1),
            Err(_) => 1,
        };
        Logs {
            next: start,
            map: HashMap::new(),
            order: VecDeque::new(),
            cap,
            keep: keep.max(1),
            counters,
        }
    }

    /// A new request-stream log; the logs of the oldest finished streams beyond `keep`
    /// are dropped.
    pub(crate) fn create(&mut self) -> Arc<EventLog> {
        let id = self.next;
        self.next = self.next.wrapping_add(1).max(1);
        let log = Arc::new(EventLog::new(id, self.cap, self.counters.clone()));
        self.map.insert(id, log.clone());
        self.order.push_back(id);
        while self.order.len() > self.keep {
            let oldest_done = self
                .order
                .iter()
                .position(|s| self.map.get(s).is_none_or(|l| l.is_done()));
            match oldest_done {
                Some(i) => {
                    if let Some(s) = self.order.remove(i) {
                        self.map.remove(&s);
                    }
                }
                None => break,
            }
        }
        log
    }

    /// The standalone stream's log (stream 0), created on first use.
    pub(crate) fn standalone(&mut self) -> Arc<EventLog> {
        let cap = self.cap;
        let counters = self.counters.clone();
        self.map
            .entry(0)
            .or_insert_with(|| Arc::new(EventLog::new(0, cap, counters)))
            .clone()
    }

    pub(crate) fn get(&self, stream: u32) -> Option<Arc<EventLog>> {
        self.map.get(&stream).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn replay_from_a_cursor_and_wait_for_more() {
        let two = Bounds {
            events: 2,
            bytes: 1 << 20,
        };
        let log = Arc::new(EventLog::new(3, two, Default::default()));
        assert_eq!(log.push(Bytes::from_static(b"a")), 1);
        assert_eq!(log.push(Bytes::from_static(b"b")), 2);
        assert_eq!(log.push(Bytes::from_static(b"c")), 3); // "a" falls out
        assert_eq!(log.next_from(1).await.unwrap().0, 2);
        assert_eq!(log.next_from(3).await.unwrap().1, Bytes::from_static(b"c"));
        let waiter = {
            let log = log.clone();
            tokio::spawn(async move { log.next_from(4).await })
        };
        tokio::task::yield_now().await;
        log.push(Bytes::from_static(b"d"));
        assert_eq!(waiter.await.unwrap().unwrap().0, 4);
        log.finish();
        assert!(log.next_from(5).await.is_none());
        assert_eq!(log.event_id(4), "3:4");
        assert_eq!(parse_event_id("3:4"), Some((3, 4)));
        assert_eq!(parse_event_id("x"), None);
    }

    #[test]
    fn a_log_is_bounded_in_bytes_too() {
        let log = EventLog::new(
            1,
            Bounds {
                events: 100,
                bytes: 10,
            },
            Default::default(),
        );
        for _ in 0..3 {
            log.push(Bytes::from_static(b"xxxx"));
        }
        // 12 bytes would not fit in 10: the first event went.
        assert_eq!(log.next_ready_from(1).map(|e| e.0), Some(2));
        log.push(Bytes::from(vec![b'y'; 50]));
        assert_eq!(log.next_ready_from(1).map(|e| e.0), Some(4), "kept alone");
    }

    #[test]
    fn finished_logs_are_pruned_live_ones_kept() {
        let mut logs = Logs::new(
            Bounds {
                events: 4,
                bytes: 1 << 20,
            },
            2,
            Default::default(),
        );
        let a = logs.create();
        let b = logs.create();
        let c = logs.create(); // a and b are live: nothing pruned
        assert!(logs.get(a.stream()).is_some());
        a.finish();
        let _d = logs.create();
        assert!(
            logs.get(a.stream()).is_none(),
            "oldest finished log dropped"
        );
        assert!(logs.get(b.stream()).is_some() && logs.get(c.stream()).is_some());
        assert_eq!(logs.standalone().stream(), 0);
    }
}
