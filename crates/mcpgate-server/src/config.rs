//! The HTTP front's limits, timers and security settings (defaults documented in the README).

use std::time::Duration;

use crate::access::AccessPolicy;
use crate::auth::AuthConfig;
use crate::conn::ConnLimits;

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
    /// Era bridge: how long a call waits for its 2026-07-28 client to answer an
    /// `input_required` result, and how many calls may wait at once.
    pub input_wait: (Duration, usize),
    /// Accepted `Host` and `Origin` values.
    pub access: AccessPolicy,
    /// Client authentication (off when empty).
    pub auth: AuthConfig,
    /// Requests per second allowed per principal (per client address without
    /// authentication), and the burst above it; `None`: no limit.
    pub rate_limit: Option<(u32, u32)>,
    /// The users' upstream consents, whose callback the front serves at
    /// `/oauth/callback` (`None`: no server delegates to its users).
    pub oauth: Option<std::sync::Arc<mcpgate_oauth::Grants>>,
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
            input_wait: (Duration::from_secs(60), 1024),
            access: AccessPolicy::default(),
            auth: AuthConfig::default(),
            rate_limit: None,
            oauth: None,
        }
    }
}
