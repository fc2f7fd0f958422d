//! The Inspector v2 protocol (npm `@modelcontextprotocol/inspector` 2.x): the backend
//! serves the UI's files and its same-origin API under `/api/`.
//!
//! Guards, in this order, on every path: `Host` must be a loopback name (a DNS-rebinding
//! page names its own host); on `/api/*` an `Origin`, when the browser sends one, must be
//! one of the backend's own origins, and `x-mcp-remote-auth: Bearer <token>` must carry
//! the token (constant-time). The UI's file answers carry the token themselves
//! (`ui.rs`). Targets come only from the allowlist, which is also the catalogue the UI
//! lists (`/api/servers`, read-only); the UI's `/api/fetch` relay is behind the SSRF
//! guard (`ssrf.rs`). Refusals are `{"error": …}` with 400, 401, 403, 404 or 405.

mod catalogue;
mod relay;
mod reply;
mod side;
pub(crate) mod state;
mod ui;

use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Limited};
use mcpgate_server::Front;
use mcpgate_server::body::{Body, ReqBody};
use serde_json::json;
use tracing::{info, warn};

use crate::guard::Guard;
use crate::inspector::Inspector;
use reply::{error, ok};
pub(crate) use ui::find_ui;

/// The header the v2 UI carries its API token in.
pub const API_TOKEN_HEADER: &str = "x-mcp-remote-auth";

/// Largest `/api/*` request body.
const MAX_API_BODY: usize = 4 << 20;

/// Answers one request.
pub(crate) async fn handle(
    front: &Arc<Front>,
    insp: &Inspector,
    v2: &state::V2,
    req: Request<ReqBody>,
) -> Response<Body> {
    if !Guard::host_ok(req.headers()) {
        return error(
            StatusCode::FORBIDDEN,
            "Forbidden: Host not allowed (the inspector answers to loopback names only)",
        );
    }
    let path = req.uri().path().to_owned();
    if !path.starts_with("/api/") {
        return match *req.method() {
            Method::GET | Method::HEAD => v2.ui.serve(&path),
            _ => error(StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed"),
        };
    }
    let origin = match req.headers().get(header::ORIGIN) {
        // With the token off, only the browser's own page may call (a same-origin fetch
        // says so; a GET of it may carry no Origin).
        None if insp.guard.token.is_none()
            && !req
                .headers()
                .get("sec-fetch-site")
                .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"same-origin")) =>
        {
            warn!("inspector: request without Origin refused (authentication is off)");
            return error(
                StatusCode::FORBIDDEN,
                "Forbidden: with authentication off, only the UI's own page may call the API",
            );
        }
        None => None,
        Some(o) if o.to_str().is_ok_and(|s| insp.guard.origin_allowed(s)) => Some(o.clone()),
        Some(o) => {
            warn!(origin = ?o, "inspector: Origin not allowed");
            return error(
                StatusCode::FORBIDDEN,
                "Forbidden: Origin not allowed (the API answers the UI it serves only)",
            );
        }
    };
    let mut resp = if req.method() == Method::OPTIONS {
        preflight()
    } else if let Err(present) = insp.guard.token_in(req.headers(), API_TOKEN_HEADER) {
        info!(present, "inspector: missing or wrong API token");
        error(
            StatusCode::UNAUTHORIZED,
            "Unauthorized: use the x-mcp-remote-auth header with Bearer <token> (the UI served by mcpgate inspector carries it)",
        )
    } else {
        api(front, insp, v2, req, &path).await
    };
    if let Some(o) = origin {
        let h = resp.headers_mut();
        h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, o);
        h.append(header::VARY, HeaderValue::from_static("Origin"));
    }
    resp
}

fn preflight() -> Response<Body> {
    let mut r = mcpgate_server::body::status(StatusCode::NO_CONTENT);
    let h = r.headers_mut();
    h.insert(
        header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static("GET, POST, PUT, DELETE, OPTIONS"),
    );
    h.insert(
        header::ACCESS_CONTROL_ALLOW_HEADERS,
        HeaderValue::from_static("content-type, x-mcp-remote-auth"),
    );
    h.insert(
        header::ACCESS_CONTROL_MAX_AGE,
        HeaderValue::from_static("600"),
    );
    r
}

async fn read(req: Request<ReqBody>) -> Result<Bytes, Response<Body>> {
    match Limited::new(req.into_body(), MAX_API_BODY).collect().await {
        Ok(b) => Ok(b.to_bytes()),
        Err(_) => Err(error(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("request body above {MAX_API_BODY} bytes, or unreadable"),
        )),
    }
}

/// Routes one `/api/*` request that passed the guards.
async fn api(
    front: &Arc<Front>,
    insp: &Inspector,
    v2: &state::V2,
    req: Request<ReqBody>,
    path: &str,
) -> Response<Body> {
    let method = req.method().clone();
    macro_rules! body {
        () => {
            match read(req).await {
                Ok(b) => b,
                Err(r) => return r,
            }
        };
    }
    match (&method, path) {
        (&Method::GET, "/api/config") => ok(insp.v2_config()),
        (&Method::GET, "/api/servers") => ok(insp.catalogue()),
        (&Method::GET, "/api/servers/events") => catalogue_events(front),
        (_, p) if p == "/api/servers" || p.starts_with("/api/servers/") => error(
            StatusCode::FORBIDDEN,
            "Server list is read-only for this session: mcpgate's catalogue is its allowlist (the inspector config file)",
        ),
        (&Method::GET, "/api/import-source") => error(
            StatusCode::FORBIDDEN,
            "importing server lists is not available: mcpgate's catalogue is its allowlist",
        ),
        (&Method::POST, "/api/app-document") => error(
            StatusCode::SERVICE_UNAVAILABLE,
            "App-origin hosting is not available",
        ),
        (&Method::POST, "/api/log") => side::log(&body!()),
        (&Method::POST, "/api/fetch") => v2.fetcher.fetch(&body!()).await,
        (_, p) if p.starts_with("/api/storage/") => {
            let id = p["/api/storage/".len()..].to_owned();
            let b = if method == Method::POST {
                body!()
            } else {
                Bytes::new()
            };
            v2.stores.serve(&method, &id, b)
        }
        (&Method::POST, "/api/mcp/connect") => {
            let b = body!();
            relay::connect(front.table(), &insp.policy, &insp.who, b).await
        }
        (&Method::GET, "/api/mcp/events") => relay::events(
            front.table(),
            crate::v1::query(&req).get("sessionId").map(String::as_str),
            front.keep_alive(),
        ),
        (&Method::POST, "/api/mcp/send") => relay::send(front.table(), body!()).await,
        (&Method::POST, "/api/mcp/disconnect") => relay::disconnect(front.table(), body!()).await,
        (&Method::POST, "/api/mcp/auth-state") => error(
            StatusCode::BAD_REQUEST,
            "Session has no OAuth auth provider: mcpgate sends the upstream credentials of its configuration ([[url]] headers)",
        ),
        (_, "/api/config" | "/api/log" | "/api/fetch" | "/api/import-source")
        | (_, "/api/mcp/connect" | "/api/mcp/events" | "/api/mcp/send")
        | (_, "/api/mcp/disconnect" | "/api/mcp/auth-state" | "/api/app-document") => {
            error(StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed")
        }
        _ => error(StatusCode::NOT_FOUND, "Not found"),
    }
}

/// `GET /api/servers/events`. The catalogue is the allowlist: it never changes under the
/// UI, so this stream only keeps itself alive, until the drain.
fn catalogue_events(front: &Front) -> Response<Body> {
    let closing = front.closing();
    let every = front.keep_alive();
    reply::sse(async_stream::stream! {
        yield Ok(Bytes::from_static(b":\n\n"));
        let mut tick = tokio::time::interval(every);
        tick.tick().await;
        loop {
            tokio::select! {
                () = closing.cancelled() => break,
                _ = tick.tick() => yield Ok(Bytes::from_static(mcpgate_jsonrpc::sse::KEEP_ALIVE)),
            }
        }
    })
}

impl Inspector {
    /// `GET /api/config`.
    fn v2_config(&self) -> serde_json::Value {
        let d = &self.defaults;
        let mut v = json!({
            // The gateway's environment is never shown or passed on.
            "defaultEnvironment": {},
            "version": concat!("mcpgate-", env!("CARGO_PKG_VERSION")),
            "writable": false,
        });
        if let Some(c) = &d.command {
            v["defaultCommand"] = json!(c);
            v["defaultTransport"] = json!("stdio");
        }
        if let Some(u) = &d.server_url {
            v["defaultServerUrl"] = json!(u);
            v["defaultTransport"] = json!(d.transport.as_deref().unwrap_or("streamable-http"));
        }
        v
    }

    /// `GET /api/servers`: the allowlist as the UI's `mcp.json` (`{mcpServers: {id: …}}`).
    fn catalogue(&self) -> serde_json::Value {
        json!({ "mcpServers": self.policy.catalogue() })
    }
}
