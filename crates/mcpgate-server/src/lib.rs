//! # mcpgate-server
//!
//! The HTTP front of mcpgate: it terminates client sessions and hands every message to
//! the session layer. It owns HTTP concerns only: routing, header and body checks,
//! choosing `application/json` or `text/event-stream` for an answer, SSE keep-alives,
//! `/healthz`, `/metrics`, and turning every error into exactly one HTTP + JSON-RPC
//! answer. It never starts processes or opens upstream connections itself.
//!
//! ## Layout
//! Every request goes through the same phases, in these files:
//! - accept — `listener.rs`: [`serve`], the accept loop, TLS and graceful shutdown;
//!   `h1/`: the HTTP/1.1 connection driver on `mcpgate-h1` (heads, bodies, answers,
//!   the client watched while a handler runs);
//!   `conn.rs`: connection limits ([`ConnLimits`]) and their reserve.
//! - admit — `route.rs`: dispatch by path through the security layers in order;
//!   `access.rs`: [`AccessPolicy`], `Host`/`Origin` checks against DNS rebinding;
//!   `auth.rs`: bearer tokens and JWT (OAuth resource server), principals;
//!   `token_cache.rs`: JWTs that verified, remembered for their validity (bounded);
//!   `inflight.rs`: 2026-07-28 requests in flight per principal.
//! - classify — `classify.rs`: the HTTP method, a POST's body read once and its era
//!   decided once; `request.rs`: header and body checks, the session a request names.
//! - plan — `plan.rs`: [`plan::Plan`](crate), what the request will do.
//! - execute — `mcp.rs`: the session era (initialize, requests, notifications, batches,
//!   GET, DELETE); `modern.rs`: 2026-07-28 toward a server of that era (forwarded, or on
//!   a leased stdio child); `bridge.rs`, `bridge_call.rs`, `bridge_listen.rs`: 2026-07-28
//!   toward a session-era server, through the era bridge; `legacy.rs`: the legacy
//!   HTTP+SSE endpoints (`GET /sse`, `POST /message`).
//! - answer — `pump.rs`: the one stream pump behind every streaming answer (keep-alive,
//!   the drain's end); `sse.rs`: a session's SSE streams (replay logs, the GET stream);
//!   `error.rs`: [`FrontError`] and the one place errors become responses; `body.rs`: the
//!   response body type and small builders.
//! - `front.rs`: [`Front`], the shared state, and what the listener knows of a connection;
//!   `hook.rs`: what a [`Fallback`] (the Inspector backend, its own crate) may hand
//!   requests to: the front's endpoints, so its sessions are ordinary sessions.
//! - `oauth.rs`: `/oauth/callback`, where users come back from consenting to an upstream
//!   server (`mcpgate-oauth` keeps the consents).

mod access;
mod auth;
pub mod body;
mod bridge;
mod bridge_call;
mod bridge_listen;
mod classify;
mod config;
mod conn;
mod error;
mod front;
mod h1;
mod hook;
mod inflight;
mod legacy;
mod listener;
mod mcp;
mod modern;
mod oauth;
mod plan;
mod pump;
mod request;
mod route;
mod sse;
mod token_cache;

pub use access::AccessPolicy;
pub use auth::{
    AuthConfig, AuthError, Authenticator, JwtConfig, StaticToken, TokenSink, VerifiedFn,
    metadata_url,
};
pub use config::FrontConfig;
pub use conn::ConnLimits;
pub use error::FrontError;
pub use front::{Conn, Fallback, Front, Reloaded};
pub use listener::serve;
