//! # mcpgate-server
//!
//! The hyper front of mcpgate: it terminates client sessions and hands every message to
//! the session layer. It owns HTTP concerns only: routing, header and body checks,
//! choosing `application/json` or `text/event-stream` for an answer, SSE keep-alives,
//! `/healthz`, `/metrics`, and turning every error into exactly one HTTP + JSON-RPC
//! answer. It never starts processes or opens upstream connections itself.
//!
//! ## Layout
//! - `auth.rs`: bearer tokens and JWT (OAuth resource server); principals.
//! - `token_cache.rs`: JWTs that verified, remembered for their validity (bounded).
//! - `access.rs`: [`AccessPolicy`], `Host`/`Origin` checks against DNS rebinding.
//! - `listener.rs`: [`serve`], the accept loop, TLS and graceful shutdown.
//! - `conn.rs`: connection limits ([`ConnLimits`]) and their reserve.
//! - `front.rs`: [`Front`], the shared state, and what the listener knows of a connection.
//! - `route.rs`: dispatch by path, through the security layers in order.
//! - `era.rs`: which era a POST belongs to, decided once, at the route.
//! - `mcp.rs`: the session-era Streamable HTTP endpoint (POST, GET, DELETE).
//! - `modern.rs`: the MCP 2026-07-28 endpoint (stateless, per request).
//! - `bridge.rs`: the era bridge — a 2026-07-28 request on a pooled upstream session of
//!   a session-era server (translation in the `mcpgate-bridge` crate).
//! - `bridge_call.rs`: one bridged call: its answer or stream, `input_required` and the
//!   held call, cancellation.
//! - `bridge_listen.rs`: `subscriptions/listen` through the bridge, on a dedicated
//!   session's GET stream.
//! - `answers.rs`: what the 2026-07-28 paths answer alike (status, errors, end hook).
//! - `inflight.rs`: 2026-07-28 requests in flight per principal.
//! - `hook.rs`: what a [`Fallback`] (the Inspector backend, its own crate) may hand
//!   requests to: the front's endpoints, so its sessions are ordinary sessions.
//! - `legacy.rs`: the legacy HTTP+SSE endpoints (`GET /sse`, `POST /message`).
//! - `sse.rs`: SSE response bodies with keep-alives.
//! - `error.rs`: [`FrontError`] and the one place errors become responses.
//! - `body.rs`: the response body type and small builders.

mod access;
mod answers;
mod auth;
pub mod body;
mod bridge;
mod bridge_call;
mod bridge_listen;
mod config;
mod conn;
mod era;
mod error;
mod front;
mod hook;
mod inflight;
mod legacy;
mod listener;
mod mcp;
mod modern;
mod request;
mod route;
mod sse;
mod token_cache;

pub use access::AccessPolicy;
pub use auth::{AuthConfig, AuthError, Authenticator, JwtConfig, StaticToken, metadata_url};
pub use config::FrontConfig;
pub use conn::ConnLimits;
pub use error::FrontError;
pub use front::{Conn, Fallback, Front, Reloaded};
pub use listener::serve;
