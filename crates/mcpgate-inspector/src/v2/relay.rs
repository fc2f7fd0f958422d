//! `/api/mcp/*`: the Inspector v2 UI's MCP relay. The browser runs the MCP client; the
//! backend holds its connection to the server. Here that connection is an ordinary mcpgate
//! session (`FrontKind::Inspector`) with its own upstream session — a child per session
//! for stdio — on the front's table, ended by the one teardown path: `disconnect`, the
//! event stream dropping, idle expiry or the drain.
//!
//! - `connect` `{config, settings}` → `{sessionId}` once the allowlist allowed the target
//!   and its upstream started (a stdio child is spawned here);
//! - `events?sessionId=` an SSE stream of `event: <type>` / `data: {"type","data"}` events:
//!   `message` for each JSON-RPC message of the server, `transport_error` when the session
//!   ended (with the upstream's cause: a child's exit status and last stderr lines);
//! - `send` `{sessionId, message}`: a request is answered `{ok:true}` once its response
//!   was put on the event stream (a `subscriptions/listen` at once); a notification or a
//!   response to the server once it went upstream; a failure is
//!   `{ok:false, kind:"transport_error", error}`;
//! - `disconnect` `{sessionId}` → `{ok:true}`;
//! - `auth-state`: refused (400) — upstream credentials come from the configuration.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use http::{Response, StatusCode};
use mcpgate_jsonrpc::{Message, sse};
use mcpgate_server::body::Body;
use mcpgate_session::{
    CloseReason, FrontKind, Holder, Listener, ServerSpec, Session, SessionError, SessionTable,
};
use serde::Deserialize;
use serde_json::{Value, json};
use tracing::{debug, info, warn};

use crate::policy::{Policy, Refusal, UpstreamTransport, decided};
use crate::v2::reply::{error, ok};

/// The UI connection `id`: a live session of the table opened by this relay. (The table
/// owns every session; what the server sends before the UI opens its event stream waits
/// in the session's bounded backlog, as for any client without a GET stream, and a
/// session whose UI never opens one is idle like any other, and expires.)
fn relay(table: &SessionTable, id: &str) -> Option<Arc<Session>> {
    table
        .get(id)
        .filter(|s| s.front() == FrontKind::Inspector && !s.is_closing())
}

/// `connect`'s body.
#[derive(Deserialize)]
struct Connect {
    config: Option<ServerConfig>,
    #[serde(default)]
    settings: Option<Settings>,
}

/// A server as the UI describes it (its `MCPServerConfig`).
#[derive(Deserialize)]
pub(crate) struct ServerConfig {
    #[serde(rename = "type")]
    kind: Option<String>,
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    url: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
}

/// The UI's per-server settings: custom headers.
#[derive(Deserialize, Default)]
struct Settings {
    #[serde(default)]
    headers: Vec<Header>,
}

#[derive(Deserialize)]
struct Header {
    key: String,
    value: String,
}

/// The spec of an allowed target, or the refusal.
fn spec_for(
    policy: &Policy,
    c: &ServerConfig,
    settings: Option<Settings>,
    authenticated: bool,
) -> Result<ServerSpec, Refusal> {
    let transport = UpstreamTransport::from_ui(
        c.kind.as_deref(),
        "config.type",
        Some(UpstreamTransport::Stdio),
    )?;
    let allowed = match transport {
        UpstreamTransport::Stdio => {
            policy.stdio_parsed(c.command.as_deref().unwrap_or(""), &c.args, &c.env)
        }
        t => {
            let mut callers: Vec<(String, String)> = c
                .headers
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            callers.extend(
                settings
                    .unwrap_or_default()
                    .headers
                    .into_iter()
                    .map(|h| (h.key, h.value)),
            );
            policy.url_with(t, c.url.as_deref(), callers)
        }
    };
    decided(allowed, authenticated)
}

/// `POST /api/mcp/connect`.
pub(crate) async fn connect(
    table: &SessionTable,
    policy: &Policy,
    who: &Option<Arc<str>>,
    body: Bytes,
) -> Response<Body> {
    let req: Connect = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => return error(StatusCode::BAD_REQUEST, format!("Invalid JSON body: {e}")),
    };
    let Some(config) = req.config else {
        return error(StatusCode::BAD_REQUEST, "Missing config");
    };
    let spec = match spec_for(policy, &config, req.settings, who.is_some()) {
        Ok(s) => s,
        Err((status, msg)) => return error(status, msg),
    };
    let session = match table
        .create(&spec, FrontKind::Inspector, who.clone(), Holder::Server)
        .await
    {
        Ok(s) => s,
        Err(e) => {
            info!(server = %spec.name, error = %e, "inspector: session not opened");
            let status = match e {
                SessionError::TooManySessions | SessionError::TooManySessionsForPrincipal => {
                    StatusCode::TOO_MANY_REQUESTS
                }
                SessionError::ShuttingDown => StatusCode::SERVICE_UNAVAILABLE,
                SessionError::Upstream(_) => StatusCode::BAD_GATEWAY,
                _ => StatusCode::INTERNAL_SERVER_ERROR,
            };
            return error(status, format!("Failed to start transport: {e}"));
        }
    };
    info!(session = %session.tag(), server = %spec.name, "inspector: UI connection opened");
    ok(json!({ "sessionId": session.id() }))
}

/// Ends the session when the event stream is dropped (the UI went away).
struct CloseOnDrop(Arc<Session>);

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        if !self.0.is_closing() {
            debug!(session = %self.0.tag(), "inspector: event stream closed by the UI");
        }
        drop(self.0.close(CloseReason::ClientGone));
    }
}

/// One SSE event as the UI reads it.
fn event(kind: &str, data: &Value) -> Bytes {
    let body = json!({ "type": kind, "data": data }).to_string();
    sse::named_event(kind, &body)
}

/// `GET /api/mcp/events?sessionId=`.
pub(crate) fn events(
    table: &SessionTable,
    id: Option<&str>,
    every: std::time::Duration,
) -> Response<Body> {
    let Some(id) = id.filter(|i| !i.is_empty()) else {
        return error(StatusCode::BAD_REQUEST, "Missing sessionId query");
    };
    let Some(session) = relay(table, id) else {
        return error(StatusCode::NOT_FOUND, "Session not found");
    };
    let mut listener: Listener = match session.listen(false) {
        Ok(l) => l,
        Err(SessionError::StreamConflict) => {
            return error(
                StatusCode::CONFLICT,
                "this session's event stream is already open",
            );
        }
        Err(e) => return error(StatusCode::NOT_FOUND, format!("Session not found: {e}")),
    };
    let guard = CloseOnDrop(session.clone());
    let gauge = session.sse_stream();
    let stream = async_stream::stream! {
        let _guard = guard;
        let _gauge = gauge;
        yield Ok::<_, std::convert::Infallible>(Bytes::from_static(b":\n\n"));
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        loop {
            tokio::select! {
                m = listener.recv() => match m {
                    Some(m) => match serde_json::from_slice::<Value>(m.raw()) {
                        Ok(v) => yield Ok(event("message", &v)),
                        Err(e) => warn!(error = %e, "inspector: server message not JSON"),
                    },
                    None => break,
                },
                _ = tick.tick() => yield Ok(Bytes::from_static(sse::KEEP_ALIVE)),
            }
        }
        // The session ended under the UI: say why, as the Inspector's own backend does.
        let why = session
            .upstream_cause()
            .map(ToString::to_string)
            .or_else(|| session.close_reason().map(|r| format!("session ended: {}", r.as_str())))
            .unwrap_or_else(|| "Transport closed".to_owned());
        yield Ok(event("transport_error", &json!({ "error": why, "code": -32000 })));
    };
    crate::v2::reply::sse(stream)
}

/// `send`'s body.
#[derive(Deserialize)]
struct Send {
    #[serde(rename = "sessionId")]
    session_id: Option<String>,
    message: Option<Box<serde_json::value::RawValue>>,
}

fn transport_error(msg: impl std::fmt::Display) -> Response<Body> {
    ok(json!({ "ok": false, "kind": "transport_error", "error": msg.to_string() }))
}

/// `POST /api/mcp/send`.
pub(crate) async fn send(table: &SessionTable, body: Bytes) -> Response<Body> {
    let req: Send = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => return error(StatusCode::BAD_REQUEST, format!("Invalid JSON body: {e}")),
    };
    let (Some(id), Some(raw)) = (req.session_id, req.message) else {
        return error(StatusCode::BAD_REQUEST, "Missing sessionId or message");
    };
    let Some(session) = relay(table, &id) else {
        return error(StatusCode::NOT_FOUND, "Session not found");
    };
    let msg = match Message::parse(Bytes::copy_from_slice(raw.get().as_bytes())) {
        Ok(m) => m,
        Err(e) => return error(StatusCode::BAD_REQUEST, format!("message: {e}")),
    };
    if !msg.is_request() {
        return match session.notify(msg).await {
            Ok(()) => ok(json!({ "ok": true })),
            Err(e) => transport_error(e),
        };
    }
    let mut ex = match session.request(msg.clone()).await {
        Ok(ex) => ex,
        Err(e) => return transport_error(e),
    };
    // A listen stream runs for as long as the UI keeps it: its messages go out on the
    // event stream, and the send is done.
    if msg.is(&mcpgate_jsonrpc::Method::Listen) {
        let s = session.clone();
        session.spawn(async move {
            while let Some(Ok(m)) = ex.next().await {
                s.deliver(m);
            }
        });
        return ok(json!({ "ok": true }));
    }
    while let Some(item) = ex.next().await {
        match item {
            Ok(m) => session.deliver(m),
            Err(e) => return transport_error(e),
        }
    }
    ok(json!({ "ok": true }))
}

/// `POST /api/mcp/disconnect`.
pub(crate) async fn disconnect(table: &SessionTable, body: Bytes) -> Response<Body> {
    let id = serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|v| v["sessionId"].as_str().map(str::to_owned));
    let Some(id) = id else {
        return error(StatusCode::BAD_REQUEST, "Missing sessionId");
    };
    if let Some(session) = relay(table, &id) {
        info!(session = %session.tag(), "inspector: UI disconnected");
        session.close(CloseReason::ClientDelete).await;
    }
    ok(json!({ "ok": true }))
}
