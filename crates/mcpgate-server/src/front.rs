//! Shared front state and dispatch by path.

use std::collections::HashMap;
use std::sync::Arc;

use http::{Request, Response};
use hyper::body::Incoming;
use mcpgate_session::{ServerSpec, SessionTable};
use prometheus_client::registry::Registry;

use crate::auth::Authenticator;
use crate::body::Body;
use crate::config::FrontConfig;

/// What every connection handler shares.
pub struct Front {
    pub(crate) table: SessionTable,
    pub(crate) servers: HashMap<String, Arc<ServerSpec>>,
    /// The server mounted at `/mcp` (the only one, or the one marked default).
    pub(crate) default: Option<Arc<ServerSpec>>,
    pub(crate) cfg: FrontConfig,
    pub(crate) registry: Registry,
    pub(crate) auth: Authenticator,
    /// Per-principal (or per-address) request rate limit.
    pub(crate) limiter: Option<governor::DefaultKeyedRateLimiter<Arc<str>>>,
    /// Serves every path the front does not (the Inspector-proxy mode's endpoints).
    pub(crate) fallback: Option<Box<dyn Fallback>>,
    /// Open connections and their caps.
    pub(crate) conns: Arc<crate::conn::Connections>,
    /// 2026-07-28 requests in flight per principal.
    pub(crate) inflight: crate::inflight::Inflight,
    /// The era bridge's upstream sessions (2026-07-28 clients of session-era servers).
    pub(crate) bridges: Arc<mcpgate_session::BridgePool>,
    /// Bridged calls waiting for their client's answers to `input_required`.
    pub(crate) held: Arc<mcpgate_session::HeldCalls>,
    /// Cancelled when the drain starts: sessionless streams (listen streams relayed to
    /// clients) end then, as sessions are closed.
    pub(crate) closing: tokio_util::sync::CancellationToken,
}

/// What serves the requests the front has no route for (the Inspector-proxy mode): a hook,
/// so the front does not depend on its user.
pub(crate) trait Fallback: Send + Sync {
    /// Answers one request.
    fn serve<'a>(
        &'a self,
        front: &'a Arc<Front>,
        req: Request<Incoming>,
        conn: Conn,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Response<Body>> + Send + 'a>>;
}

/// What the listener knows of a request's connection, handed to [`Front::handle`] with
/// each request (not through the request's extensions: that would allocate a map per
/// request).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Conn {
    /// The client's address.
    pub(crate) peer: std::net::SocketAddr,
    /// Whether the connection holds a reserve slot (see `conn.rs`).
    pub(crate) reserve: bool,
}

impl std::fmt::Debug for Front {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Front")
            .field("servers", &self.servers.keys())
            .finish()
    }
}

impl Front {
    /// A front serving `servers` (mounted at `/servers/{name}/mcp`; `default`, if given,
    /// also at `/mcp`). Fails when the JWKS endpoint's TLS files are unusable.
    pub fn new(
        table: SessionTable,
        servers: Vec<ServerSpec>,
        default: Option<&str>,
        cfg: FrontConfig,
    ) -> Result<Arc<Self>, mcpgate_tls::TlsError> {
        let mut registry = Registry::default();
        table.register_metrics(&mut registry);
        let conns = crate::conn::Connections::new(cfg.connections);
        let inflight = crate::inflight::Inflight::new(cfg.modern_inflight);
        conns.register(&mut registry);
        let servers: HashMap<String, Arc<ServerSpec>> = servers
            .into_iter()
            .map(|s| (s.name.clone(), Arc::new(s)))
            .collect();
        let default = match default {
            Some(name) => servers.get(name).cloned(),
            None if servers.len() == 1 => servers.values().next().cloned(),
            None => None,
        };
        let auth = Authenticator::new(cfg.auth.clone())?;
        let limiter = cfg.rate_limit.and_then(|(per_second, burst)| {
            let quota = governor::Quota::per_second(std::num::NonZeroU32::new(per_second)?)
                .allow_burst(std::num::NonZeroU32::new(burst.max(1))?);
            Some(governor::RateLimiter::keyed(quota))
        });
        Ok(Arc::new(Front {
            bridges: mcpgate_session::BridgePool::new(table.clone()),
            held: mcpgate_session::HeldCalls::new(
                cfg.input_wait.1,
                cfg.input_wait.0,
                table.id_prefix(),
            ),
            table,
            servers,
            default,
            cfg,
            registry,
            auth,
            limiter,
            fallback: None,
            conns,
            inflight,
            closing: tokio_util::sync::CancellationToken::new(),
        }))
    }

    /// The session table.
    pub fn table(&self) -> &SessionTable {
        &self.table
    }
}
