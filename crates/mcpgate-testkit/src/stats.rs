//! Counters the testkit keeps so tests can assert what reached the upstream.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;

/// A point-in-time snapshot of a server's counters (also served as JSON at `GET /stats`).
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct Stats {
    /// Sessions minted by `initialize`.
    pub sessions_created: u64,
    /// Sessions ended by `DELETE`.
    pub sessions_deleted: u64,
    /// Sessions currently alive (`created - deleted`).
    pub sessions_active: u64,
    /// JSON-RPC requests received (messages with `method` and `id`).
    pub requests: u64,
    /// JSON-RPC notifications received.
    pub notifications_received: u64,
    /// JSON-RPC responses received (answers to server-to-client requests).
    pub responses_received: u64,
    /// Timer notifications delivered.
    pub timer_sent: u64,
    /// Timer notifications that had nowhere to go (no GET stream, or session gone).
    pub timer_dropped: u64,
    /// In-flight calls ended by `notifications/cancelled`.
    pub cancelled: u64,
    /// Standalone GET SSE streams currently open (a GET resuming a POST
    /// response stream is not counted).
    pub get_streams_open: u64,
    /// GET requests whose `Last-Event-ID` named a stream of their session that
    /// the server still knew, so it was replayed (and continued, if still live).
    pub resumed: u64,
    /// The client's answers to `sample_async` requests, in arrival order: the
    /// answer's `content.text`, or `error: <error JSON>` for an error answer
    /// (`<no text>` for a result without `content.text`).
    pub sampled: Vec<String>,
    /// Headers of the most recent POST, in arrival order (names lower-case).
    pub last_headers: Vec<(String, String)>,
    /// Headers of the most recent POST of each `Mcp-Method` (2026-07-28 requests name
    /// their method in a header), so a background request cannot hide a call's.
    pub method_headers: std::collections::BTreeMap<String, Vec<(String, String)>>,
    /// `flood` notifications handed to a reader (HTTP: the GET stream's connection;
    /// stdio: written to stdout).
    pub flood_sent: u64,
    /// SSE answers ended early on purpose by `close_early` (HTTP).
    pub closed_early: u64,
    /// TLS connections whose handshake failed (HTTPS mode).
    pub tls_handshake_failures: u64,
    /// TLS connections established (HTTPS mode).
    pub tls_connections: u64,
    /// Requests answered with a redirect ([`crate::HttpOptions::redirect`]).
    pub redirected: u64,
    /// Connections closed because they sat idle longer than `HttpOptions::idle_close`.
    pub idle_closed: u64,
    /// POSTs received on the MCP endpoint (HTTP), whatever came of them.
    pub posts: u64,
    /// 2026-07-28 `hang` streams still open (the client has not gone away).
    pub modern_streams_open: u64,
}

/// The live, shared counters behind [`Stats`].
#[derive(Debug, Default)]
pub(crate) struct StatsCell {
    pub(crate) sessions_created: AtomicU64,
    pub(crate) sessions_deleted: AtomicU64,
    pub(crate) requests: AtomicU64,
    pub(crate) notifications_received: AtomicU64,
    pub(crate) responses_received: AtomicU64,
    pub(crate) timer_sent: AtomicU64,
    pub(crate) timer_dropped: AtomicU64,
    pub(crate) cancelled: AtomicU64,
    pub(crate) get_streams_open: AtomicU64,
    pub(crate) resumed: AtomicU64,
    pub(crate) sampled: Mutex<Vec<String>>,
    pub(crate) last_headers: Mutex<Vec<(String, String)>>,
    pub(crate) method_headers: Mutex<std::collections::BTreeMap<String, Vec<(String, String)>>>,
    pub(crate) flood_sent: AtomicU64,
    pub(crate) closed_early: AtomicU64,
    pub(crate) tls_handshake_failures: AtomicU64,
    pub(crate) tls_connections: AtomicU64,
    pub(crate) redirected: AtomicU64,
    pub(crate) idle_closed: AtomicU64,
    pub(crate) posts: AtomicU64,
    pub(crate) modern_streams_open: AtomicU64,
}

/// Adds one to a counter.
pub(crate) fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

impl StatsCell {
    /// Replaces the recorded headers of the last POST.
    pub(crate) fn set_last_headers(&self, headers: Vec<(String, String)>) {
        if let Some((_, method)) = headers.iter().find(|(k, _)| k == "mcp-method") {
            let method = method.clone();
            match self.method_headers.lock() {
                Ok(mut g) => g.insert(method, headers.clone()),
                Err(poisoned) => poisoned.into_inner().insert(method, headers.clone()),
            };
        }
        match self.last_headers.lock() {
            Ok(mut g) => *g = headers,
            Err(poisoned) => *poisoned.into_inner() = headers,
        }
    }

    /// Records the client's answer to a `sample_async` request.
    pub(crate) fn record_sampled(&self, text: String) {
        match self.sampled.lock() {
            Ok(mut g) => g.push(text),
            Err(poisoned) => poisoned.into_inner().push(text),
        }
    }

    /// Takes a consistent-enough snapshot for assertions.
    pub(crate) fn snapshot(&self) -> Stats {
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let created = load(&self.sessions_created);
        let deleted = load(&self.sessions_deleted);
        let last_headers = match self.last_headers.lock() {
            Ok(g) => g.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        };
        let method_headers = match self.method_headers.lock() {
            Ok(g) => g.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        };
        let sampled = match self.sampled.lock() {
            Ok(g) => g.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        };
        Stats {
            sessions_created: created,
            sessions_deleted: deleted,
            sessions_active: created.saturating_sub(deleted),
            requests: load(&self.requests),
            notifications_received: load(&self.notifications_received),
            responses_received: load(&self.responses_received),
            timer_sent: load(&self.timer_sent),
            timer_dropped: load(&self.timer_dropped),
            cancelled: load(&self.cancelled),
            get_streams_open: load(&self.get_streams_open),
            resumed: load(&self.resumed),
            sampled,
            last_headers,
            method_headers,
            flood_sent: load(&self.flood_sent),
            closed_early: load(&self.closed_early),
            tls_handshake_failures: load(&self.tls_handshake_failures),
            tls_connections: load(&self.tls_connections),
            redirected: load(&self.redirected),
            idle_closed: load(&self.idle_closed),
            posts: load(&self.posts),
            modern_streams_open: load(&self.modern_streams_open),
        }
    }
}

/// Keeps `get_streams_open` accurate: counts up when made, down when dropped.
#[derive(Debug)]
pub(crate) struct OpenStreamGuard {
    stats: std::sync::Arc<StatsCell>,
}

impl OpenStreamGuard {
    /// Counts one more open GET stream until the guard is dropped.
    pub(crate) fn new(stats: std::sync::Arc<StatsCell>) -> Self {
        bump(&stats.get_streams_open);
        Self { stats }
    }
}

impl Drop for OpenStreamGuard {
    fn drop(&mut self) {
        self.stats.get_streams_open.fetch_sub(1, Ordering::Relaxed);
    }
}
