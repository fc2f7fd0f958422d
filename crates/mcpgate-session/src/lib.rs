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
//! - `sealed.rs`: sealed session ids ([`SessionTable::seal`], [`SessionTable::find`]):
//!   any replica with the keys resumes a Streamable HTTP session from its id;
//!   `sealing.rs`: the state behind them (key ring, deleted stateless ids).
//! - `sink.rs`: the session's event sink (what an upstream's reader delivers).
//! - `router.rs`: where a message that belongs to no request goes (GET stream, else an
//!   in-flight POST stream, else a bounded backlog).
//! - `exchange.rs`: [`Exchange`], one client request in flight.
//! - `pool.rs`: upstreams kept per (principal, server) for sessionless requests.
//! - `leased.rs`: [`Lease`] and [`LeasedExchange`], a request on a leased upstream.
//! - `bridged.rs`: [`BridgePool`] and [`BridgeLease`], upstream sessions the era bridge holds for 2026-07-28
//!   clients of session-era servers, leased to one request at a time.
//! - `held.rs`: [`HeldCalls`], bridged calls held while their client answers an
//!   `input_required` result.
//! - `replay.rs`: [`EventLog`], per-stream logs for resumable SSE streams.
//! - `metrics.rs`: Prometheus metrics, their request-path handles resolved once.
//! - `histogram.rs`: the lock-free latency histogram.
//! - `shared.rs`: what every session holds strongly (config, metrics, tracker, clock),
//!   id minting and [`short_id`].
//! - `virtuals.rs`: sessions of virtual servers (one upstream session per member, see
//!   `mcpgate_upstream::MembersUpstream`): the principal's groups for the access rules,
//!   the members' metrics.
//! - `error.rs`: [`SessionError`].

mod bridged;
mod config;
mod eras;
mod error;
mod exchange;
mod held;
mod histogram;
mod kinds;
mod leased;
mod metrics;
mod pool;
mod probe;
mod replay;
mod router;
mod sealed;
mod sealing;
mod session;
mod shared;
mod sink;
mod spec;
mod table;
mod virtuals;

pub use bridged::{BridgeLease, BridgePool};
pub use config::SessionConfig;
pub use eras::{Era, Protocol};
pub use error::SessionError;
pub use exchange::Exchange;
pub use held::{HeldCall, HeldCalls, Refusal};
pub use kinds::{CloseReason, FrontKind};
pub use leased::{Lease, LeasedExchange};
pub use mcpgate_seal::looks_sealed;
pub use metrics::{Metrics, StreamGauge};
pub use replay::{EventLog, parse_event_id};
pub use session::{Listener, Session};
pub use shared::short_id;
pub use spec::ServerSpec;
pub use table::SessionTable;
pub use virtuals::GroupsSink;
