//! Shared front state and dispatch by path.

use std::collections::HashMap;
use std::sync::Arc;

use crate::body::ReqBody;
use http::{Request, Response};
use mcpgate_session::{ServerSpec, SessionTable};
use prometheus_client::registry::Registry;

use arc_swap::ArcSwap;

use crate::auth::Authenticator;
use crate::body::Body;
use crate::config::FrontConfig;

/// What every connection handler shares.
pub struct Front {
    pub(crate) table: SessionTable,
    /// What a reload replaces: servers, authentication, the rate limit. Read once per
    /// request (a lock-free load); swapped whole by [`Front::reload`].
    pub(crate) live: ArcSwap<Live>,
    pub(crate) cfg: FrontConfig,
    pub(crate) registry: Registry,
    /// Serves every path the front does not (the Inspector backend: `hook.rs`).
    pub(crate) fallback: Option<Box<dyn Fallback>>,
    /// Open connections and their caps.
    pub(crate) conns: Arc<crate::conn::Connections>,
    /// 2026-07-28 requests in flight per principal.
    pub(crate) inflight: crate::inflight::Inflight,
    /// Bridged calls waiting for their client's answers to `input_required`.
    pub(crate) held: Arc<mcpgate_session::HeldCalls>,
    /// Cancelled when the drain starts: sessionless streams (listen streams relayed to
    /// clients) end then, as sessions are closed.
    pub(crate) closing: tokio_util::sync::CancellationToken,
}

/// The part of the front's configuration a reload replaces.
pub(crate) struct Live {
    pub(crate) servers: HashMap<String, Arc<ServerSpec>>,
    /// The server mounted at `/mcp` (the only one, or the one marked default).
    pub(crate) default: Option<Arc<ServerSpec>>,
    pub(crate) auth: Authenticator,
    /// Per-principal (or per-address) request rate limit.
    pub(crate) limiter: Option<governor::DefaultKeyedRateLimiter<Arc<str>>>,
}

impl Live {
    fn new(
        table: &SessionTable,
        servers: Vec<ServerSpec>,
        default: Option<&str>,
        (auth, rate_limit): (crate::auth::AuthConfig, Option<(u32, u32)>),
    ) -> Result<Self, mcpgate_tls::TlsError> {
        let servers: HashMap<String, Arc<ServerSpec>> = servers
            .into_iter()
            .map(|s| (s.name.clone(), Arc::new(s)))
            .collect();
        let default = match default {
            Some(name) => servers.get(name).cloned(),
            None if servers.len() == 1 => servers.values().next().cloned(),
            None => None,
        };
        let auth = Authenticator::new(auth)?.with_groups_sink(table.groups_sink());
        let limiter = rate_limit.and_then(|(per_second, burst)| {
            let quota = governor::Quota::per_second(std::num::NonZeroU32::new(per_second)?)
                .allow_burst(std::num::NonZeroU32::new(burst.max(1))?);
            Some(governor::RateLimiter::keyed(quota))
        });
        Ok(Live {
            servers,
            default,
            auth,
            limiter,
        })
    }
}

/// What a reload changed.
#[derive(Debug, Default)]
pub struct Reloaded {
    /// Servers that were not configured before.
    pub added: Vec<String>,
    /// Servers no longer configured.
    pub removed: Vec<String>,
    /// Servers whose configuration changed.
    pub changed: Vec<String>,
    /// Sessions ended because their server was removed or changed.
    pub sessions_ended: usize,
}

/// What serves the requests the front has no route for: a hook, so the front does not
/// depend on its user.
pub trait Fallback: Send + Sync {
    /// Answers one request.
    fn serve<'a>(
        &'a self,
        front: &'a Arc<Front>,
        req: Request<ReqBody>,
        conn: Conn,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Response<Body>> + Send + 'a>>;
}

impl Conn {
    /// The client's address.
    pub fn peer(&self) -> std::net::SocketAddr {
        self.peer
    }
}

/// What the listener knows of a request's connection, handed to [`Front::handle`] with
/// each request (not through the request's extensions: that would allocate a map per
/// request).
#[derive(Debug, Clone, Copy)]
pub struct Conn {
    /// The client's address.
    pub(crate) peer: std::net::SocketAddr,
    /// Whether the connection holds a reserve slot (see `conn.rs`).
    pub(crate) reserve: bool,
}

impl std::fmt::Debug for Front {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Front")
            .field("servers", &self.live.load().servers.keys())
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
        Self::build(table, servers, default, cfg, None)
    }

    pub(crate) fn build(
        table: SessionTable,
        servers: Vec<ServerSpec>,
        default: Option<&str>,
        cfg: FrontConfig,
        fallback: Option<Box<dyn Fallback>>,
    ) -> Result<Arc<Self>, mcpgate_tls::TlsError> {
        let mut registry = Registry::default();
        table.register_metrics(&mut registry);
        let conns = crate::conn::Connections::new(cfg.connections);
        let inflight = crate::inflight::Inflight::new(cfg.modern_inflight);
        conns.register(&mut registry);
        let live = Live::new(&table, servers, default, (cfg.auth.clone(), cfg.rate_limit))?;
        Ok(Arc::new(Front {
            held: mcpgate_session::HeldCalls::new(
                cfg.input_wait.1,
                cfg.input_wait.0,
                table.id_prefix(),
            ),
            table,
            live: ArcSwap::from_pointee(live),
            cfg,
            registry,
            fallback,
            conns,
            inflight,
            closing: tokio_util::sync::CancellationToken::new(),
        }))
    }

    /// The session table.
    pub fn table(&self) -> &SessionTable {
        &self.table
    }

    /// Replaces the servers, the authentication and the rate limit (a configuration
    /// reload). Servers that did not change keep their sessions; the sessions of removed
    /// and changed servers end through the teardown path (reason `config_reload`) once the
    /// new configuration serves. Fails — changing nothing — when a server's upstream
    /// cannot be prepared or the JWKS endpoint's TLS files are unusable.
    pub async fn reload(
        &self,
        servers: Vec<ServerSpec>,
        default: Option<&str>,
        auth: crate::auth::AuthConfig,
        rate_limit: Option<(u32, u32)>,
    ) -> Result<Reloaded, crate::error::FrontError> {
        let old = self.live.load_full();
        let mut out = Reloaded::default();
        for s in &servers {
            match old.servers.get(&s.name) {
                None => out.added.push(s.name.clone()),
                Some(o) if **o != *s => out.changed.push(s.name.clone()),
                Some(_) => {}
            }
        }
        for name in old.servers.keys() {
            if !servers.iter().any(|s| &s.name == name) {
                out.removed.push(name.clone());
            }
        }
        let fresh: Vec<ServerSpec> = servers
            .iter()
            .filter(|s| out.added.contains(&s.name) || out.changed.contains(&s.name))
            .cloned()
            .collect();
        let live = Live::new(&self.table, servers.clone(), default, (auth, rate_limit))
            .map_err(crate::error::FrontError::ReloadAuth)?;
        for s in &fresh {
            self.table
                .add_server(s)
                .map_err(|e| crate::error::FrontError::Reload {
                    server: s.name.clone(),
                    source: Box::new(e),
                })?;
        }
        self.live.store(Arc::new(live));
        // Only once the reload took: a refused one leaves the old pools serving.
        self.table.keep_warm_only(&servers);
        for name in out.removed.iter().chain(&out.changed) {
            out.sessions_ended += self
                .table
                .close_server(name, mcpgate_session::CloseReason::ConfigReload)
                .await;
        }
        out.added.sort();
        out.removed.sort();
        out.changed.sort();
        Ok(out)
    }
}
