//! Shared front state and dispatch by path.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use hyper::body::Incoming;
use mcpgate_session::{ServerSpec, SessionTable};
use prometheus_client::registry::Registry;

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
}

impl std::fmt::Debug for Front {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Front")
            .field("servers", &self.servers.keys())
            .finish()
    }
}

/// Where a request path leads.
enum Route<'a> {
    Mcp(&'a Arc<ServerSpec>),
    Health,
    Metrics,
    None,
}

impl Front {
    /// A front serving `servers` (mounted at `/servers/{name}/mcp`; `default`, if given,
    /// also at `/mcp`).
    pub fn new(
        table: SessionTable,
        servers: Vec<ServerSpec>,
        default: Option<&str>,
        cfg: FrontConfig,
    ) -> Arc<Self> {
        let mut registry = Registry::default();
        table.register_metrics(&mut registry);
        let servers: HashMap<String, Arc<ServerSpec>> = servers
            .into_iter()
            .map(|s| (s.name.clone(), Arc::new(s)))
            .collect();
        let default = match default {
            Some(name) => servers.get(name).cloned(),
            None if servers.len() == 1 => servers.values().next().cloned(),
            None => None,
        };
        Arc::new(Front {
            table,
            servers,
            default,
            cfg,
            registry,
        })
    }

    /// The session table.
    pub fn table(&self) -> &SessionTable {
        &self.table
    }

    fn route<'a>(&'a self, path: &'a str) -> Route<'a> {
        match path {
            "/mcp" | "/mcp/" => self.default.as_ref().map_or(Route::None, Route::Mcp),
            "/healthz" => Route::Health,
            "/metrics" => Route::Metrics,
            p => p
                .strip_prefix("/servers/")
                .and_then(|rest| {
                    rest.strip_suffix("/mcp")
                        .or_else(|| rest.strip_suffix("/mcp/"))
                })
                .and_then(|name| self.servers.get(name))
                .map_or(Route::None, Route::Mcp),
        }
    }

    /// Answers one HTTP request. Never fails: every error is an HTTP answer.
    pub(crate) async fn handle(self: Arc<Self>, req: Request<Incoming>) -> Response<Body> {
        match self.route(req.uri().path()) {
            Route::Mcp(server) => {
                let server = server.clone();
                mcp::handle(&self, &server, req).await
            }
            Route::Health => text(StatusCode::OK, "ok\n"),
            Route::Metrics if req.method() == Method::GET => self.metrics(),
            Route::Metrics => FrontError::MethodNotAllowed("GET").into_response(None),
            Route::None => FrontError::NoRoute.into_response(None),
        }
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
