//! # mcpgate-session
//!
//! The session table and everything a client session owns: its dedicated upstream
//! session, its client streams, its cancellation token and its one teardown path.
//!
//! Invariants this crate enforces by construction:
//! - **one client session ⇒ one dedicated upstream session**: [`SessionTable::create`]
//!   opens a fresh upstream for every session and nothing else ever holds it;
//! - **strict routing**: an upstream message is delivered either on the stream of the
//!   request it answers (the upstream's per-request [`mcpgate_upstream::Replies`]) or, when
//!   it belongs to no request, by the upstream's reader straight into the owning session's
//!   router (its `EventSink`) — there is no global "current transport";
//! - **one teardown path**: client DELETE, idle expiry, upstream death, admin kill and
//!   shutdown all go through [`Session::close`], which runs at most once.
//!
//! ## Layout
//! - `eras.rs`: which protocol era each server speaks ([`Protocol`], [`Era`]).
//! - `table.rs`: [`SessionTable`] (dashmap of id → `Arc<Session>`), id minting, the idle
//!   reaper, shutdown.
//! - `session.rs`: [`Session`] and [`Session::close`].
//! - `sink.rs`: the session's event sink (what an upstream's reader delivers).
//! - `router.rs`: where a message that belongs to no request goes (GET stream, else an
//!   in-flight POST stream, else a bounded backlog).
//! - `exchange.rs`: [`Exchange`], one client request in flight.
//! - `pool.rs`: upstreams kept per (principal, server) for sessionless requests.
//! - `leased.rs`: [`Lease`] and [`LeasedExchange`], a request on a leased upstream.
//! - `replay.rs`: [`EventLog`], per-stream logs for resumable SSE streams.
//! - `metrics.rs`: Prometheus metrics.
//! - `error.rs`: [`SessionError`].

mod eras;
mod error;
mod exchange;
mod leased;
mod metrics;
mod pool;
mod replay;
mod router;
mod session;
mod sink;
mod table;

use std::time::Duration;

pub use eras::{Era, Protocol};
pub use error::SessionError;
pub use exchange::Exchange;
pub use leased::{Lease, LeasedExchange};
pub use metrics::{Metrics, StreamGauge};
pub use replay::{EventLog, parse_event_id};
pub use session::{CloseReason, FrontKind, Listener, Session};
pub use table::{ServerSpec, SessionTable};

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
    /// How long a request may wait for its response before the client gets an error.
    pub request_timeout: Duration,
    /// Events kept per SSE stream for replay to a client that resumes.
    pub replay_events: usize,
    /// Finished request streams whose logs a session keeps for replay.
    pub replay_streams: usize,
    /// How long a learned protocol era of an `auto` server is trusted.
    pub era_ttl: Duration,
    /// How long a 2026-07-28 request waits while its principal's stdio child is starting.
    pub lease_wait: Duration,
}

impl Default for SessionConfig {
    fn default() -> Self {
        SessionConfig {
            idle_timeout: Duration::from_secs(600),
            max_sessions: 10_000,
            max_sessions_per_principal: 1_000,
            max_inflight: 64,
            backlog: 256,
            request_timeout: Duration::from_secs(300),
            replay_events: 256,
            replay_streams: 8,
            era_ttl: Duration::from_secs(600),
            lease_wait: Duration::from_secs(30),
        }
    }
}
