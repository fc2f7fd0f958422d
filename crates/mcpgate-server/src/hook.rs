//! What the front offers the [`Fallback`](crate::Fallback) that serves the paths it has no
//! route for (the Inspector backend, in its own crate): [`Front::with_fallback`], and the
//! front's own endpoints it may hand a request to, so that every session it opens is an
//! ordinary session — the same table, checks, answers and teardown path as `/mcp`.

use std::sync::Arc;

use crate::body::ReqBody;
use http::{HeaderMap, Request, Response};
use mcpgate_session::{ServerSpec, SessionTable};
use mcpgate_upstream::Target;

use crate::body::Body;
use crate::config::FrontConfig;
use crate::front::Front;

impl Front {
    /// A front with no configured servers whose every unrouted path goes to `fallback`
    /// (the front still serves `/healthz`, `/readyz` and `/metrics` itself).
    pub fn with_fallback(
        table: SessionTable,
        cfg: FrontConfig,
        fallback: Box<dyn crate::front::Fallback>,
    ) -> Result<Arc<Self>, mcpgate_tls::TlsError> {
        Self::build(table, Vec::new(), None, cfg, Some(fallback))
    }

    /// The Streamable HTTP endpoint for `server` (POST, GET, DELETE, either era), as at
    /// `/servers/{name}/mcp`; `who` is the principal the session is bound to.
    pub async fn serve_mcp(
        self: &Arc<Self>,
        server: &Arc<ServerSpec>,
        req: Request<ReqBody>,
        who: &Option<Arc<str>>,
        peer: std::net::IpAddr,
    ) -> Response<Body> {
        crate::classify::handle(self, server, req, who, None, peer).await
    }

    /// Opens a legacy HTTP+SSE session with `server`; its `endpoint` event names
    /// `message_path?sessionId=…`.
    pub async fn open_sse(
        self: &Arc<Self>,
        server: &Arc<ServerSpec>,
        h: &HeaderMap,
        message_path: &str,
        who: &Option<Arc<str>>,
    ) -> Response<Body> {
        crate::legacy::open(self, server, h, message_path, who)
            .await
            .unwrap_or_else(|e| {
                tracing::info!(server = %server.name, error = %e, "session not opened");
                e.into_response(None)
            })
    }

    /// A legacy `POST …/message?sessionId=…` to a session opened by [`Front::open_sse`].
    pub async fn post_message(
        self: &Arc<Self>,
        req: Request<ReqBody>,
        who: &Option<Arc<str>>,
    ) -> Response<Body> {
        let server = self.session_server(crate::legacy::session_id(req.uri().query()));
        crate::legacy::post(self, &server, req, who)
            .await
            .unwrap_or_else(|e| {
                tracing::info!(error = %e, "legacy message refused");
                e.into_response(None)
            })
    }

    /// How often idle SSE streams get a keep-alive comment (`listen.keep_alive`).
    pub fn keep_alive(&self) -> std::time::Duration {
        self.cfg.keep_alive
    }

    /// Cancelled when the drain starts: a fallback's streams that belong to no session end
    /// then (sessions' streams end as their sessions are closed).
    pub fn closing(&self) -> tokio_util::sync::CancellationToken {
        self.closing.clone()
    }

    /// What a request to an existing session (by id) is checked against: a spec naming
    /// the session's own server. It opens nothing: only a request without a session opens
    /// one, and that one takes its caller's spec. An unknown id gets a name no session has.
    pub fn session_server(&self, id: Option<&str>) -> Arc<ServerSpec> {
        let name = id
            .and_then(|id| self.table.get(id))
            .map_or_else(String::new, |s| s.server().to_owned());
        Arc::new(ServerSpec::new(
            name,
            Target::Http {
                url: String::new(),
                headers: Vec::new(),
                http: Default::default(),
                auth: None,
            },
        ))
    }
}
