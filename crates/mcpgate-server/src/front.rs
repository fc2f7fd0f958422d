//! Shared front state and dispatch by path.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use hyper::body::Incoming;
use mcpgate_session::{ServerSpec, SessionTable};
use prometheus_client::registry::Registry;

use crate::auth::{AuthError, Authenticator};
use crate::body::{Body, full, text};
use crate::{FrontConfig, FrontError, mcp};

/// What every connection handler shares.
pub struct Front {
    pub(crate) table: SessionTable,
    servers: HashMap<String, Arc<ServerSpec>>,
    /// The server mounted at `/mcp` (the only one, or the one marked default).
    default: Option<Arc<ServerSpec>>,
    pub(crate) cfg: FrontConfig,
    registry: Registry,
    auth: Authenticator,
    /// Per-principal (or per-address) request rate limit.
    limiter: Option<governor::DefaultKeyedRateLimiter<Arc<str>>>,
    /// Inspector-proxy mode: serves every path not served above.
    inspector: Option<crate::inspector::Inspector>,
    /// Open connections and their caps.
    pub(crate) conns: Arc<crate::conn::Connections>,
    /// 2026-07-28 requests in flight per principal.
    pub(crate) inflight: crate::inflight::Inflight,
    /// Cancelled when the drain starts: sessionless streams (listen streams relayed to
    /// clients) end then, as sessions are closed.
    pub(crate) closing: tokio_util::sync::CancellationToken,
}

/// The client's address, put in each request's extensions by the listener.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Peer(pub(crate) std::net::SocketAddr);

/// Marks a request that arrived on a reserve connection (see `conn.rs`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Reserve;

impl std::fmt::Debug for Front {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Front")
            .field("servers", &self.servers.keys())
            .finish()
    }
}

/// Where a request path leads.
enum Route<'a> {
    /// An MCP endpoint, and the prefix its legacy message path goes under.
    Mcp(&'a Arc<ServerSpec>, &'a str),
    /// Legacy SSE stream; the path clients POST to.
    LegacySse(&'a Arc<ServerSpec>, String),
    LegacyMessage(&'a Arc<ServerSpec>),
    Health,
    Ready,
    /// RFC 9728 protected resource metadata.
    ResourceMetadata,
    Metrics,
    /// `/`: a line naming the MCP endpoints, for a lost user.
    Index,
    None,
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
            table,
            servers,
            default,
            cfg,
            registry,
            auth,
            limiter,
            inspector: None,
            conns,
            inflight,
            closing: tokio_util::sync::CancellationToken::new(),
        }))
    }

    /// A front in Inspector-proxy mode ([`crate::InspectorConfig`]): no configured
    /// servers; each session's target comes from the caller, within the allowlist.
    pub fn new_inspector(
        table: SessionTable,
        cfg: FrontConfig,
        inspector: crate::InspectorConfig,
    ) -> Result<Arc<Self>, mcpgate_tls::TlsError> {
        let mut front = Self::new(table, Vec::new(), None, cfg)?;
        if let Some(f) = Arc::get_mut(&mut front) {
            f.inspector = Some(crate::inspector::Inspector::new(inspector));
        }
        Ok(front)
    }

    /// The session table.
    pub fn table(&self) -> &SessionTable {
        &self.table
    }

    fn route<'a>(&'a self, path: &'a str) -> Route<'a> {
        let path = path
            .strip_suffix('/')
            .filter(|p| !p.is_empty())
            .unwrap_or(path);
        match path {
            "/" => return Route::Index,
            "/healthz" => return Route::Health,
            "/metrics" => return Route::Metrics,
            "/readyz" => return Route::Ready,
            p if p == "/.well-known/oauth-protected-resource"
                || p.starts_with("/.well-known/oauth-protected-resource/") =>
            {
                return Route::ResourceMetadata;
            }
            _ => {}
        }
        // `/servers/{name}/{endpoint}` or, for the default server, `/{endpoint}`.
        let (server, endpoint, prefix) = match path
            .strip_prefix("/servers/")
            .and_then(|r| r.split_once('/'))
        {
            Some((name, ep)) => match self.servers.get(name) {
                Some(s) => (s, ep, &path[..path.len() - ep.len() - 1]),
                None => return Route::None,
            },
            None => match &self.default {
                Some(s) => (s, &path[1..], ""),
                None => return Route::None,
            },
        };
        match endpoint {
            "mcp" => Route::Mcp(server, prefix),
            "sse" => Route::LegacySse(server, format!("{prefix}/message")),
            "message" | "messages" => Route::LegacyMessage(server),
            _ => Route::None,
        }
    }

    /// Whether a request on a reserve connection may be served: probes, metrics, and
    /// requests that name a live session.
    fn reserve_allows(&self, route: &Route<'_>, req: &Request<Incoming>) -> bool {
        match route {
            Route::Health | Route::Ready | Route::Metrics => true,
            Route::Mcp(..) => req
                .headers()
                .get(mcpgate_jsonrpc::mcp::SESSION_ID_HEADER)
                .and_then(|v| v.to_str().ok())
                .is_some_and(|id| self.table.get(id).is_some()),
            Route::LegacyMessage(_) => req
                .uri()
                .query()
                .and_then(|q| q.split('&').find_map(|kv| kv.strip_prefix("sessionId=")))
                .is_some_and(|id| self.table.get(id).is_some()),
            _ => false,
        }
    }

    /// Answers one HTTP request. Never fails: every error is an HTTP answer.
    pub(crate) async fn handle(self: Arc<Self>, req: Request<Incoming>) -> Response<Body> {
        let route = self.route(req.uri().path());
        if req.extensions().get::<Reserve>().is_some() && !self.reserve_allows(&route, &req) {
            self.conns.refused("reserve");
            tracing::info!(
                path = req.uri().path(),
                "gateway crowded: a reserve connection serves only probes and existing sessions"
            );
            let mut r = FrontError::Crowded.into_response(None);
            r.headers_mut()
                .insert(header::CONNECTION, http::HeaderValue::from_static("close"));
            return r;
        }
        if matches!(
            route,
            Route::Mcp(..) | Route::LegacySse(..) | Route::LegacyMessage(_)
        ) && let Err(why) = self.cfg.access.check(req.headers())
        {
            tracing::warn!(host = ?req.headers().get(http::header::HOST), origin = ?req.headers().get(http::header::ORIGIN), "{why}");
            return FrontError::Forbidden(why).into_response(None);
        }
        let who = if matches!(
            route,
            Route::Mcp(..) | Route::LegacySse(..) | Route::LegacyMessage(_)
        ) {
            match self.auth.authenticate(req.headers()).await {
                Ok(who) => who,
                Err(e) => return self.auth_refusal(&e, req.uri().path()),
            }
        } else {
            None
        };
        if let Some(limiter) = &self.limiter
            && matches!(
                route,
                Route::Mcp(..) | Route::LegacySse(..) | Route::LegacyMessage(_)
            )
        {
            let key: Arc<str> = match &who {
                Some(p) => p.clone(),
                None => req
                    .extensions()
                    .get::<Peer>()
                    .map_or_else(|| Arc::from("?"), |p| Arc::from(p.0.ip().to_string())),
            };
            if let Err(not_until) = limiter.check_key(&key) {
                let wait = not_until.wait_time_from(governor::clock::Clock::now(
                    &governor::clock::DefaultClock::default(),
                ));
                tracing::info!(who = %key, "rate limited");
                return FrontError::RateLimited(wait.as_secs().max(1)).into_response(None);
            }
            if limiter.len() > 10_000 {
                limiter.retain_recent();
            }
        }
        match route {
            Route::Mcp(server, prefix) => {
                let server = server.clone();
                let message_path = format!("{prefix}/message");
                mcp::handle(&self, &server, req, &who, Some(&message_path)).await
            }
            Route::LegacySse(server, message_path) if req.method() == Method::GET => {
                crate::legacy::open(&self, server, req.headers(), &message_path, &who)
                    .await
                    .unwrap_or_else(|e| e.into_response(None))
            }
            Route::LegacyMessage(server) if req.method() == Method::POST => {
                let server = server.clone();
                crate::legacy::post(&self, &server, req, &who)
                    .await
                    .unwrap_or_else(|e| {
                        tracing::info!(server = %server.name, error = %e, "legacy message refused");
                        e.into_response(None)
                    })
            }
            Route::LegacySse(..) => FrontError::MethodNotAllowed("GET").into_response(None),
            Route::LegacyMessage(_) => FrontError::MethodNotAllowed("POST").into_response(None),
            Route::ResourceMetadata => match self.auth.resource_metadata() {
                Some(doc) => {
                    let mut r = crate::body::json(StatusCode::OK, doc.to_string());
                    r.headers_mut().insert(
                        http::header::ACCESS_CONTROL_ALLOW_ORIGIN,
                        http::HeaderValue::from_static("*"),
                    );
                    r
                }
                None => FrontError::NoRoute.into_response(None),
            },
            Route::Index if self.inspector.is_none() => self.index(),
            Route::Health => text(StatusCode::OK, "ok\n"),
            Route::Ready if self.table.is_accepting() => text(StatusCode::OK, "ready\n"),
            Route::Ready => text(StatusCode::SERVICE_UNAVAILABLE, "draining\n"),
            Route::Metrics if req.method() == Method::GET => self.metrics(),
            Route::Metrics => FrontError::MethodNotAllowed("GET").into_response(None),
            Route::None | Route::Index => match &self.inspector {
                Some(i) => crate::inspector::handle(&self, i, req).await,
                None => FrontError::NoRoute.into_response(None),
            },
        }
    }

    /// `GET /`: where the MCP endpoints are.
    fn index(&self) -> Response<Body> {
        let mut names: Vec<&String> = self.servers.keys().collect();
        names.sort();
        let mut out = String::from(
            "mcpgate: an MCP gateway. MCP endpoints (Streamable HTTP; legacy HTTP+SSE at …/sse):",
        );
        if self.default.is_some() {
            out.push_str(" /mcp");
        }
        for n in names {
            out.push_str(" /servers/");
            out.push_str(n);
            out.push_str("/mcp");
        }
        out.push('\n');
        let mut r = Response::new(full(Bytes::from(out)));
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            http::HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        r
    }

    /// 401 (no or bad credentials) or 403 (missing scope), with the challenge that tells
    /// an OAuth client where to start.
    fn auth_refusal(&self, e: &AuthError, path: &str) -> Response<Body> {
        tracing::info!(path, error = %e, "request not authenticated");
        let status = match e {
            AuthError::InsufficientScope(_) => StatusCode::FORBIDDEN,
            _ => StatusCode::UNAUTHORIZED,
        };
        let body = mcpgate_jsonrpc::JsonRpcError::new(
            mcpgate_jsonrpc::error::BAD_REQUEST,
            self.auth.refusal_message(e),
        )
        .to_body(None);
        let mut r = crate::body::json(status, body);
        if let Ok(v) = http::HeaderValue::from_str(&self.auth.challenge(e)) {
            r.headers_mut().insert(http::header::WWW_AUTHENTICATE, v);
        }
        r
    }

    fn metrics(&self) -> Response<Body> {
        self.table.refresh_gauges();
        let mut out = String::with_capacity(4096);
        if prometheus_client::encoding::text::encode(&mut out, &self.registry).is_err() {
            return text(
                StatusCode::INTERNAL_SERVER_ERROR,
                "metrics encoding failed\n",
            );
        }
        let mut r = Response::new(full(Bytes::from(out)));
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            http::HeaderValue::from_static(
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            ),
        );
        r
    }
}
