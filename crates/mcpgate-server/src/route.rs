//! Dispatch of every request by path: the security layers in order (Host/Origin,
//! authentication, rate limit, the connection reserve), then the endpoint.

use std::sync::Arc;

use crate::body::ReqBody;
use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use mcpgate_session::ServerSpec;

use crate::auth::AuthError;
use crate::body::{Body, full, text};
use crate::error::FrontError;
use crate::front::{Conn, Front, Live};
use crate::request::Principal;

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
    /// `/oauth/callback`: a user back from consenting to an upstream server.
    OAuthCallback,
    /// `/`: a line naming the MCP endpoints, for a lost user.
    Index,
    None,
}

impl Front {
    fn route<'a>(&self, live: &'a Live, path: &'a str) -> Route<'a> {
        let path = path
            .strip_suffix('/')
            .filter(|p| !p.is_empty())
            .unwrap_or(path);
        match path {
            "/" => return Route::Index,
            "/healthz" => return Route::Health,
            "/metrics" => return Route::Metrics,
            "/readyz" => return Route::Ready,
            "/oauth/callback" if self.cfg.oauth.is_some() => return Route::OAuthCallback,
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
            Some((name, ep)) => match live.servers.get(name) {
                Some(s) => (s, ep, &path[..path.len() - ep.len() - 1]),
                None => return Route::None,
            },
            None => match &live.default {
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
    fn reserve_allows(&self, route: &Route<'_>, req: &Request<ReqBody>) -> bool {
        match route {
            Route::Health | Route::Ready | Route::Metrics => true,
            Route::Mcp(..) => req
                .headers()
                .get(mcpgate_jsonrpc::mcp::SESSION_ID_HEADER)
                .and_then(|v| v.to_str().ok())
                .is_some_and(|id| self.table.is_live_here(id)),
            Route::LegacyMessage(_) => req
                .uri()
                .query()
                .and_then(|q| q.split('&').find_map(|kv| kv.strip_prefix("sessionId=")))
                .is_some_and(|id| self.table.get(id).is_some()),
            _ => false,
        }
    }

    /// Answers one HTTP request. Never fails: every error is an HTTP answer.
    pub(crate) async fn handle(
        self: Arc<Self>,
        req: Request<ReqBody>,
        conn: Conn,
    ) -> Response<Body> {
        // A clone of the URI (reference-counted, no copy) for the route to borrow from, so
        // the request itself can be handed on.
        let uri = req.uri().clone();
        let live = self.live.load_full();
        let route = self.route(&live, uri.path());
        match self.admit(&live, &route, &req, conn).await {
            Ok(who) => self.serve(&live, route, req, who, conn).await,
            Err(refusal) => refusal,
        }
    }

    /// The admit phase, in order: the connection reserve, `Host`/`Origin`,
    /// authentication, the rate limit. The principal, or the refusal.
    async fn admit(
        &self,
        live: &Live,
        route: &Route<'_>,
        req: &Request<ReqBody>,
        conn: Conn,
    ) -> Result<Principal, Response<Body>> {
        if conn.reserve && !self.reserve_allows(route, req) {
            self.conns.refused("reserve");
            tracing::info!(
                path = req.uri().path(),
                "gateway crowded: a reserve connection serves only probes and existing sessions"
            );
            let mut r = FrontError::Crowded.into_response(None);
            r.headers_mut()
                .insert(header::CONNECTION, http::HeaderValue::from_static("close"));
            return Err(r);
        }
        if !matches!(
            route,
            Route::Mcp(..) | Route::LegacySse(..) | Route::LegacyMessage(_)
        ) {
            return Ok(None);
        }
        if let Err(why) = self.cfg.access.check(req.headers()) {
            tracing::warn!(host = ?req.headers().get(http::header::HOST), origin = ?req.headers().get(http::header::ORIGIN), "{why}");
            return Err(FrontError::Forbidden(why).into_response(None));
        }
        let who = match live.auth.authenticate(req.headers()).await {
            Ok(who) => who,
            Err(e) => return Err(auth_refusal(&live.auth, &e, req.uri().path())),
        };
        if let Some(limiter) = &live.limiter {
            let key: Arc<str> = match &who {
                Some(p) => p.clone(),
                None => Arc::from(conn.peer.ip().to_string()),
            };
            if let Err(not_until) = limiter.check_key(&key) {
                let wait = not_until.wait_time_from(governor::clock::Clock::now(
                    &governor::clock::DefaultClock::default(),
                ));
                tracing::info!(who = %key, "rate limited");
                return Err(FrontError::RateLimited(wait.as_secs().max(1)).into_response(None));
            }
        }
        Ok(who)
    }

    /// The endpoint a route leads to.
    async fn serve(
        self: &Arc<Self>,
        live: &Live,
        route: Route<'_>,
        req: Request<ReqBody>,
        who: Principal,
        conn: Conn,
    ) -> Response<Body> {
        match route {
            Route::Mcp(server, prefix) => {
                crate::classify::handle(self, server, req, &who, Some(prefix), conn.peer.ip()).await
            }
            Route::LegacySse(server, message_path) if req.method() == Method::GET => {
                crate::legacy::open(self, server, req.headers(), &message_path, &who)
                    .await
                    .unwrap_or_else(|e| e.into_response(None))
            }
            Route::LegacyMessage(server) if req.method() == Method::POST => {
                crate::legacy::post(self, server, req, &who)
                    .await
                    .unwrap_or_else(|e| {
                        tracing::info!(server = %server.name, error = %e, "legacy message refused");
                        e.into_response(None)
                    })
            }
            Route::LegacySse(..) => FrontError::MethodNotAllowed("GET").into_response(None),
            Route::LegacyMessage(_) => FrontError::MethodNotAllowed("POST").into_response(None),
            Route::ResourceMetadata => match live.auth.resource_metadata() {
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
            Route::OAuthCallback if req.method() == Method::GET => self.oauth_callback(&req).await,
            Route::OAuthCallback => FrontError::MethodNotAllowed("GET").into_response(None),
            Route::Index if self.fallback.is_none() => self.index(),
            Route::Health => text(StatusCode::OK, "ok\n"),
            Route::Ready if self.table.is_accepting() => text(StatusCode::OK, "ready\n"),
            Route::Ready => text(StatusCode::SERVICE_UNAVAILABLE, "draining\n"),
            Route::Metrics if req.method() == Method::GET => self.metrics(),
            Route::Metrics => FrontError::MethodNotAllowed("GET").into_response(None),
            Route::None | Route::Index => match &self.fallback {
                Some(f) => f.serve(self, req, conn).await,
                None => FrontError::NoRoute.into_response(None),
            },
        }
    }

    /// `GET /`: where the MCP endpoints are.
    fn index(&self) -> Response<Body> {
        let live = self.live.load();
        let mut names: Vec<&String> = live.servers.keys().collect();
        names.sort();
        let mut out = String::from(
            "mcpgate: an MCP gateway. MCP endpoints (Streamable HTTP; legacy HTTP+SSE at …/sse):",
        );
        if live.default.is_some() {
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

/// 401 (no or bad credentials) or 403 (missing scope), with the challenge that tells an
/// OAuth client where to start.
fn auth_refusal(auth: &crate::auth::Authenticator, e: &AuthError, path: &str) -> Response<Body> {
    tracing::info!(path, error = %e, "request not authenticated");
    let status = match e {
        AuthError::InsufficientScope(_) => StatusCode::FORBIDDEN,
        _ => StatusCode::UNAUTHORIZED,
    };
    let body = mcpgate_jsonrpc::JsonRpcError::new(
        mcpgate_jsonrpc::error::BAD_REQUEST,
        auth.refusal_message(e),
    )
    .to_body(None);
    let mut r = crate::body::json(status, body);
    if let Ok(v) = http::HeaderValue::from_str(&auth.challenge(e)) {
        r.headers_mut().insert(http::header::WWW_AUTHENTICATE, v);
    }
    r
}
