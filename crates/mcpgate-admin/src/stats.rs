//! Time series for the dashboard, derived by sampling the session table once a second.
//!
//! The table's Prometheus metrics are not readable from here, so the sampler builds its
//! own series from what every session exposes: which sessions exist (their set, compared
//! with the previous sample, gives the sessions opened and closed in between), their
//! server, their requests in flight and their message counters. A session that closed is
//! still held from the previous sample, so its final counters and its close reason are
//! known: sessions the upstream ended (process exit, reset, refused `initialize`) are
//! counted apart as upstream failures. A session that opened and closed between two
//! samples is not seen at all.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use mcpgate_session::{Session, SessionTable};
use serde::Serialize;
use tokio_util::sync::CancellationToken;

/// Time between samples.
pub(crate) const INTERVAL: Duration = Duration::from_secs(1);
/// Samples kept: five minutes.
pub(crate) const WINDOW: usize = 300;

/// One sample: the state at `t` and what happened since the previous sample.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Sample {
    /// Unix time in milliseconds.
    t: u64,
    /// Live sessions per server.
    active: BTreeMap<String, u64>,
    /// Sessions that appeared since the previous sample.
    opened: u64,
    /// Sessions that went away since the previous sample (any reason).
    closed: u64,
    /// Of `closed`, those the upstream ended (exited, reset, refused `initialize`).
    closed_upstream: u64,
    /// Requests in flight, all sessions.
    inflight: u64,
    /// Messages forwarded client → upstream since the previous sample.
    messages_in: u64,
    /// Messages delivered upstream → client since the previous sample.
    messages_out: u64,
}

impl Sample {
    /// A sample taken at `t` (Unix ms) that counts nothing yet.
    fn at(t: u64) -> Self {
        Sample {
            t,
            active: BTreeMap::new(),
            opened: 0,
            closed: 0,
            closed_upstream: 0,
            inflight: 0,
            messages_in: 0,
            messages_out: 0,
        }
    }
}

/// The ring of recent samples, shared between the sampler and the API.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    /// Plain mutex: held only to push or copy, never across an `.await`.
    samples: Mutex<VecDeque<Sample>>,
    /// Servers from the configuration, listed even while they have no session.
    configured: Vec<String>,
}

/// What `GET /api/stats` returns.
#[derive(Debug, Serialize)]
pub(crate) struct StatsView {
    interval_ms: u64,
    window: usize,
    /// Every server that appears in the configuration or in a sample.
    servers: Vec<String>,
    /// Oldest first.
    samples: Vec<Sample>,
}

impl Stats {
    pub(crate) fn new(configured: Vec<String>) -> Self {
        Stats {
            samples: Mutex::new(VecDeque::with_capacity(WINDOW)),
            configured,
        }
    }

    fn push(&self, s: Sample) {
        if let Ok(mut q) = self.samples.lock() {
            while q.len() >= WINDOW {
                q.pop_front();
            }
            q.push_back(s);
        }
    }

    /// A copy of the window.
    pub(crate) fn view(&self) -> StatsView {
        let samples: Vec<Sample> = self
            .samples
            .lock()
            .map(|q| q.iter().cloned().collect())
            .unwrap_or_default();
        let mut servers = self.configured.clone();
        for s in &samples {
            for name in s.active.keys() {
                if !servers.contains(name) {
                    servers.push(name.clone());
                }
            }
        }
        StatsView {
            interval_ms: u64::try_from(INTERVAL.as_millis()).unwrap_or(1000),
            window: WINDOW,
            servers,
            samples,
        }
    }
}

/// What the sampler remembers of a session between two samples.
struct Seen {
    session: Arc<Session>,
    messages: (u64, u64),
}

/// Samples `table` every [`INTERVAL`] into `stats` until `shutdown`.
pub(crate) async fn run(table: SessionTable, stats: Arc<Stats>, shutdown: CancellationToken) {
    let mut every = tokio::time::interval(INTERVAL);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut sampler = Sampler::new();
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            _ = every.tick() => {}
        }
        stats.push(sampler.sample(&table));
    }
}

/// Turns consecutive snapshots of the table into samples.
pub(crate) struct Sampler {
    /// The sessions of the previous sample, by id; `None` before the first.
    prev: Option<HashMap<String, Seen>>,
}

impl Sampler {
    /// A sampler whose first sample counts nothing as opened.
    pub(crate) fn new() -> Self {
        Sampler { prev: None }
    }

    /// Takes a snapshot of `table` and compares it with the previous one.
    pub(crate) fn sample(&mut self, table: &SessionTable) -> Sample {
        let first = self.prev.is_none();
        let mut prev = self.prev.take().unwrap_or_default();
        let mut now: HashMap<String, Seen> = HashMap::new();
        let mut s = Sample::at(unix_ms());
        for session in table.sessions() {
            *s.active.entry(session.server().to_owned()).or_default() += 1;
            s.inflight += session.inflight() as u64;
            let messages = session.message_counts();
            let before = match prev.remove(session.id()) {
                Some(seen) => seen.messages,
                // The first sample has no baseline: it counts nothing as new.
                None if first => messages,
                None => {
                    s.opened += 1;
                    (0, 0)
                }
            };
            s.messages_in += messages.0.saturating_sub(before.0);
            s.messages_out += messages.1.saturating_sub(before.1);
            now.insert(session.id().to_owned(), Seen { session, messages });
        }
        // What is left of the previous sample went away in between.
        for seen in prev.into_values() {
            s.closed += 1;
            if seen.session.close_reason().is_some_and(|r| r.is_upstream()) {
                s.closed_upstream += 1;
            }
            let last = seen.session.message_counts();
            s.messages_in += last.0.saturating_sub(seen.messages.0);
            s.messages_out += last.1.saturating_sub(seen.messages.1);
        }
        self.prev = Some(now);
        s
    }
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(n: u64) -> Sample {
        Sample {
            active: BTreeMap::from([("b".to_owned(), n)]),
            ..Sample::at(n)
        }
    }

    #[test]
    fn keeps_a_bounded_window_and_lists_servers() {
        let stats = Stats::new(vec!["a".into()]);
        for n in 0..(WINDOW as u64 + 10) {
            stats.push(sample(n));
        }
        let v = stats.view();
        assert_eq!(v.samples.len(), WINDOW);
        assert_eq!(v.samples[0].t, 10);
        assert_eq!(v.servers, vec!["a".to_owned(), "b".to_owned()]);
    }
}
