//! The session layer's limits and timers (defaults documented in the README).

use std::time::Duration;

/// Limits and timers of sessions. Defaults are documented in the README.
#[derive(Debug, Clone)]
pub struct SessionConfig {
    /// A session with no request in flight and no open stream for this long is closed.
    pub idle_timeout: Duration,
    /// Upper bound on live sessions; `initialize` beyond it gets 503.
    pub max_sessions: usize,
    /// Upper bound on live sessions of one principal; beyond it `initialize` gets 429.
    pub max_sessions_per_principal: usize,
    /// Upper bound on requests in flight in one session.
    pub max_inflight: usize,
    /// Messages buffered for a session while no client stream can take them, and per
    /// client stream before a slow reader loses its stream.
    pub backlog: usize,
    /// Bytes of messages the session backlog holds (beyond it the oldest go; the newest
    /// is kept whatever its size).
    pub backlog_bytes: usize,
    /// How long a request may wait for its response before the client gets an error.
    pub request_timeout: Duration,
    /// Events kept per SSE stream for replay to a client that resumes.
    pub replay_events: usize,
    /// Bytes of events kept per SSE stream for replay.
    pub replay_bytes: usize,
    /// Finished request streams whose logs a session keeps for replay.
    pub replay_streams: usize,
    /// How long a learned protocol era of an `auto` server is trusted.
    pub era_ttl: Duration,
    /// How long a 2026-07-28 request waits while its principal's stdio child is starting.
    pub lease_wait: Duration,
    /// Upstream sessions the era bridge keeps per (principal, server, declared client
    /// capabilities): the most 2026-07-28 requests of one such key served at once by a
    /// session-era server.
    pub bridge_sessions: usize,
}

impl Default for SessionConfig {
    fn default() -> Self {
        SessionConfig {
            idle_timeout: Duration::from_secs(600),
            max_sessions: 10_000,
            max_sessions_per_principal: 1_000,
            max_inflight: 64,
            backlog: 256,
            backlog_bytes: 4 * 1024 * 1024,
            request_timeout: Duration::from_secs(300),
            replay_events: 256,
            replay_bytes: 4 * 1024 * 1024,
            replay_streams: 8,
            era_ttl: Duration::from_secs(600),
            lease_wait: Duration::from_secs(30),
            bridge_sessions: 4,
        }
    }
}
