//! # mcpgate-session
//!
//! The session table and everything a client session owns: its dedicated upstream
//! session, its client streams, its cancellation token and its one teardown path; and,
//! for requests without a session (MCP 2026-07-28), what stands in for one — a principal's
//! stdio child, the era bridge's pooled sessions, held calls.
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
//! - `table.rs`: [`SessionTable`], a handle over its parts; creating a session (the plan
//!   of its upstream's opening: [`Holder`], sealing, a virtual server's audience).
//! - `store.rs`: the session store (live sessions by id, per-principal counts, id minting,
//!   [`short_id`]); `runtime.rs`: what every session runs with (limits, metrics, tasks,
//!   clock, the sealer).
//! - `session.rs`: [`Session`]; `teardown.rs`: [`Session::close`], the one teardown path;
//!   `exchange.rs`: [`Exchange`], one client request in flight.
//! - `lifecycle.rs`: closing a server's sessions, the idle reaper, shutdown.
//! - `sink.rs`: the session's event sink (what an upstream's reader delivers);
//!   `router.rs`: where a message that belongs to no request goes (GET stream, else an
//!   in-flight POST stream, else a bounded backlog); `replay.rs`: [`EventLog`], per-stream
//!   logs for resumable SSE streams.
//! - `eras.rs`: which protocol era each server speaks ([`Protocol`], [`Era`]), cached;
//!   `stateless.rs`: the era asked for a 2026-07-28 request, and its one exchange.
//! - `pool.rs`: one keyed pool for what requests without a session lease;
//!   `children.rs`: stdio children per (principal, server), `lease.rs`: a request on one
//!   ([`Lease`], [`LeasedExchange`]); `bridge_pool.rs`: the era bridge's sessions per
//!   (principal, server, capabilities), `bridge_lease.rs`: leasing one ([`BridgeLease`]); `held.rs`: [`HeldCalls`], bridged calls held
//!   while their client answers an `input_required` result.
//! - `sealer.rs`: the state behind sealed ids; `sealed.rs`: sealing a session, finding
//!   and resuming the session a sealed id names.
//! - `directory.rs`: principals' groups; `virtuals.rs`: what virtual sessions' members
//!   count in the metrics.
//! - `metrics.rs`: Prometheus metrics, their request-path handles resolved once;
//!   `histogram.rs`: the lock-free latency histogram.
//! - `error.rs`: [`SessionError`].

mod bridge_lease;
mod bridge_pool;
mod children;
mod config;
mod directory;
mod eras;
mod error;
mod exchange;
mod held;
mod histogram;
mod kinds;
mod lease;
mod lifecycle;
mod metrics;
mod pool;
mod replay;
mod router;
mod runtime;
mod sealed;
mod sealer;
mod session;
mod sink;
mod spec;
mod stateless;
mod store;
mod table;
mod teardown;
mod virtuals;

pub use bridge_lease::BridgeLease;
pub use config::SessionConfig;
pub use directory::GroupsSink;
pub use eras::{Era, Protocol};
pub use error::SessionError;
pub use exchange::Exchange;
pub use held::{CallKey, HeldCall, HeldCalls, Unresumable};
pub use kinds::{CloseReason, FrontKind};
pub use lease::{Lease, LeasedExchange};
pub use mcpgate_seal::looks_sealed;
pub use metrics::{Metrics, StreamGauge};
pub use replay::{EventLog, parse_event_id};
pub use session::{Listener, Session};
pub use spec::ServerSpec;
pub use store::short_id;
pub use table::{Holder, SessionTable};
