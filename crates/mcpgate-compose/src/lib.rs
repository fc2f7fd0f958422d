//! # mcpgate-compose
//!
//! What a client session's upstream is made of, above the transports of
//! `mcpgate-upstream`: one server's own session over its transport; for a session-era
//! client of a server that speaks only MCP 2026-07-28, a session the gateway holds itself
//! (the era bridge toward the server, translated by `mcpgate-bridge`); or, for a virtual
//! server, one session per member with requests fanned out, merged and routed (the rules
//! of `mcpgate-virtual`). It opens no sockets of its own: every byte goes through a
//! transport.
//!
//! ## Layout
//! - `backend.rs`: [`Backend`] (one server's [`mcpgate_upstream::Target`], or a
//!   [`VirtualTarget`]).
//! - `connector.rs`: [`Connector::open`], one entry for every backend and [`Mode`].
//! - `upstream.rs`: [`SessionUpstream`], what a session holds; `server.rs`:
//!   [`ServerUpstream`], one server's session.
//! - `reverse.rs`: [`Reverse`], the session held for a 2026-07-28-only server;
//!   `reverse_call.rs`: one call through it, its `input_required` rounds;
//!   `reverse_wire.rs`: its exchanges with the server.
//! - `members.rs`: [`Members`], a virtual server's upstream: routing by name and URI;
//!   `members_list.rs`: the fan-out (initialize, lists) and name resolution;
//!   `members_shared.rs`: what the members share (which are up, routes, their sinks).

mod backend;
mod connector;
mod members;
mod members_list;
mod members_shared;
mod reverse;
mod reverse_call;
mod reverse_wire;
mod server;
mod upstream;

pub use backend::{Backend, MemberTarget, VirtualTarget};
pub use connector::{Connector, Mode, Opening};
pub use members::{FORBIDDEN, MemberEvents, MemberState, Members};
pub use reverse::Reverse;
pub use server::ServerUpstream;
pub use upstream::SessionUpstream;
