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
//! - `access.rs`: [`AccessPolicy`], `Host`/`Origin` checks against DNS rebinding.
//! - `listener.rs`: [`serve`], the accept loop, TLS and graceful shutdown.
//! - `conn.rs`: connection limits ([`ConnLimits`]) and their reserve.
//! - `front.rs`: [`Front`], the shared state, and request dispatch by path.
//! - `era.rs`: which era a POST belongs to, decided once, at the route.
//! - `mcp.rs`: the session-era Streamable HTTP endpoint (POST, GET, DELETE).
//! - `modern.rs`: the MCP 2026-07-28 endpoint (stateless, per request).
//! - `inflight.rs`: 2026-07-28 requests in flight per principal.
//! - `inspector.rs`: Inspector-proxy mode (the MCP Inspector UI's backend protocol).
//! - `legacy.rs`: the legacy HTTP+SSE endpoints (`GET /sse`, `POST /message`).
//! - `sse.rs`: SSE response bodies with keep-alives.
//! - `error.rs`: [`FrontError`] and the one place errors become responses.
//! - `body.rs`: the response body type and small builders.

mod access;
mod auth;
mod body;
mod conn;
mod era;
mod error;
mod front;
mod inflight;
mod inspector;
mod legacy;
mod listener;
mod mcp;
mod modern;
mod sse;

use std::time::Duration;

pub use access::AccessPolicy;
pub use auth::{AuthConfig, AuthError, Authenticator, JwtConfig, StaticToken, metadata_url};
pub use conn::ConnLimits;
pub use error::FrontError;
pub use front::Front;
pub use inspector::{
    InspectorConfig, InspectorDefaults, ProxyAuth, StdioRule, TOKEN_HEADER, UrlRule,
    literal_pattern, quote_args,
};
pub use listener::serve;

/// Limits and timers of the HTTP front. Defaults are documented in the README.
#[derive(Debug, Clone)]
pub struct FrontConfig {
    /// Largest accepted request body, in bytes (413 beyond).
    pub max_body: usize,
    /// Interval of SSE keep-alive comments on idle streams.
    pub keep_alive: Duration,
    /// How long in-flight requests may finish after a shutdown signal.
    pub drain: Duration,
    /// Time allowed to read a request's head (and an idle keep-alive connection's life).
    pub header_timeout: Duration,
    /// Time allowed to read a request's body; beyond it the client gets 408.
    pub body_timeout: Duration,
    /// Connection caps.
    pub connections: ConnLimits,
    /// TLS on the listener (`None`: plain HTTP).
    pub tls: Option<std::sync::Arc<mcpgate_tls::ServerTls>>,
    /// 2026-07-28 requests in flight per principal (or client address); beyond: 429.
    pub modern_inflight: usize,
    /// Accepted `Host` and `Origin` values.
    pub access: AccessPolicy,
    /// Client authentication (off when empty).
    pub auth: AuthConfig,
    /// Requests per second allowed per principal (per client address without
    /// authentication), and the burst above it; `None`: no limit.
    pub rate_limit: Option<(u32, u32)>,
}

impl Default for FrontConfig {
    fn default() -> Self {
        FrontConfig {
            max_body: 4 * 1024 * 1024,
            keep_alive: Duration::from_secs(15),
            drain: Duration::from_secs(25),
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            connections: ConnLimits::default(),
            tls: None,
            modern_inflight: 256,
            access: AccessPolicy::default(),
            auth: AuthConfig::default(),
            rate_limit: None,
        }
    }
}
