//! Routing and the handlers of the admin API and the dashboard.

use std::sync::Arc;

use bytes::Bytes;
use http::header::{
    ALLOW, CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, HeaderValue, REFERRER_POLICY,
    WWW_AUTHENTICATE, X_CONTENT_TYPE_OPTIONS, X_FRAME_OPTIONS,
};
use http::{Method, Request, Response, StatusCode};
use http_body_util::Full;
use mcpgate_session::{CloseReason, Era, Session, SessionTable};
use serde::Serialize;
use serde_json::json;
use tracing::{debug, info};

use crate::auth;
use crate::stats::Stats;

/// The dashboard: one self-contained page.
const DASHBOARD: &str = include_str!("dashboard.html");

/// The dashboard's Content-Security-Policy: nothing from anywhere else; the page's
/// inline script and style, and requests to this origin.
const DASHBOARD_CSP: &str = "default-src 'none'; script-src 'unsafe-inline'; \
    style-src 'unsafe-inline'; img-src data:; connect-src 'self'; base-uri 'none'; \
    form-action 'none'; frame-ancestors 'none'";

/// Shortest id prefix `DELETE /api/sessions/{prefix}` accepts.
pub(crate) const MIN_PREFIX: usize = 8;

/// Everything a request handler needs.
#[derive(Debug)]
pub(crate) struct State {
    pub(crate) table: SessionTable,
    pub(crate) token: String,
    pub(crate) config: serde_json::Value,
    pub(crate) stats: Arc<Stats>,
    pub(crate) grants: Option<Arc<mcpgate_oauth::Grants>>,
}

/// The response body type.
pub(crate) type Body = Full<Bytes>;

/// One session as the API shows it: never the full id.
#[derive(Debug, Serialize)]
pub(crate) struct Summary {
    id_prefix: String,
    server: String,
    principal: Option<String>,
    front: &'static str,
    age_ms: u64,
    idle_ms: u64,
    inflight: usize,
    messages_in: u64,
    messages_out: u64,
    upstream: &'static str,
    child_pid: Option<u32>,
    /// A stdio child's last stderr lines, oldest first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    child_stderr: Vec<String>,
    /// A virtual server's members: which are up for this session.
    #[serde(skip_serializing_if = "Option::is_none")]
    members: Option<Vec<Member>>,
    closing: bool,
}

/// One member of a virtual server's session.
#[derive(Debug, Serialize)]
pub(crate) struct Member {
    server: String,
    up: bool,
    upstream: &'static str,
    child_pid: Option<u32>,
}

impl State {
    fn summary(&self, s: &Session) -> Summary {
        // The short form the logs use: the replica prefix and 8 characters of the random
        // part (the session crate's rule, as it mints the ids).
        let (messages_in, messages_out) = s.message_counts();
        Summary {
            id_prefix: mcpgate_session::short_id(s.id()).to_owned(),
            server: s.server().to_owned(),
            principal: s.principal().map(str::to_owned),
            front: s.front().as_str(),
            age_ms: millis(s.age()),
            idle_ms: millis(s.idle_for()),
            inflight: s.inflight(),
            messages_in,
            messages_out,
            upstream: s.upstream_kind(),
            child_pid: s.child_pid(),
            child_stderr: s.child_stderr(),
            members: s.members().map(|ms| {
                ms.into_iter()
                    .map(|m| Member {
                        server: m.server.to_string(),
                        up: m.up,
                        upstream: m.kind,
                        child_pid: m.pid,
                    })
                    .collect()
            }),
            closing: s.is_closing(),
        }
    }
}

fn millis(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Answers one request.
pub(crate) async fn handle<B>(state: Arc<State>, req: Request<B>) -> Response<Body> {
    let path = req.uri().path();
    let method = req.method().clone();
    match path {
        "/" | "/index.html" => match method {
            Method::GET | Method::HEAD => dashboard(),
            _ => not_allowed("GET, HEAD"),
        },
        "/healthz" => match method {
            Method::GET | Method::HEAD => text(StatusCode::OK, "ok\n"),
            _ => not_allowed("GET, HEAD"),
        },
        p if p == "/api" || p.starts_with("/api/") => {
            if let Err(denied) = auth::check(req.headers(), &state.token) {
                debug!(path = p, reason = denied.message(), "admin request refused");
                return unauthorized(denied);
            }
            api(&state, &method, p).await
        }
        _ => error(StatusCode::NOT_FOUND, "not found"),
    }
}

async fn api(state: &State, method: &Method, path: &str) -> Response<Body> {
    match path {
        "/api/sessions" => match *method {
            Method::GET => list(state),
            _ => not_allowed("GET"),
        },
        "/api/config" => match *method {
            Method::GET => json_response(StatusCode::OK, &state.config),
            _ => not_allowed("GET"),
        },
        "/api/servers" => match *method {
            Method::GET => servers(state),
            _ => not_allowed("GET"),
        },
        "/api/stdio" => match *method {
            Method::GET => failing_starts(state),
            _ => not_allowed("GET"),
        },
        "/api/stats" => match *method {
            Method::GET => json_response(StatusCode::OK, &state.stats.view()),
            _ => not_allowed("GET"),
        },
        "/api/grants" => match *method {
            Method::GET => answer(crate::grants::list(state.grants.as_ref()).await),
            _ => not_allowed("GET"),
        },
        p if p.starts_with("/api/grants/") => match *method {
            Method::DELETE => {
                let rest = &p["/api/grants/".len()..];
                answer(crate::grants::revoke(state.grants.as_ref(), rest).await)
            }
            _ => not_allowed("DELETE"),
        },
        p => match p.strip_prefix("/api/sessions/") {
            Some(prefix) => match *method {
                Method::DELETE => end(state, prefix).await,
                _ => not_allowed("DELETE"),
            },
            None => error(StatusCode::NOT_FOUND, "not found"),
        },
    }
}

/// `GET /api/servers`: each configured server with its protocol era (as configured, or
/// as learned for `auto`) and the stdio children kept for 2026-07-28 requests, per
/// principal.
fn servers(state: &State) -> Response<Body> {
    let learned: std::collections::HashMap<String, &'static str> = state
        .table
        .learned_eras()
        .into_iter()
        .map(|(s, e)| (s, e.as_str()))
        .collect();
    let pools = state.table.pool_counts();
    let configured = state
        .config
        .get("server")
        .and_then(|s| s.as_array())
        .cloned()
        .unwrap_or_default();
    let out: Vec<serde_json::Value> = configured
        .iter()
        .filter_map(|s| {
            let name = s.get("name")?.as_str()?.to_owned();
            let protocol = s
                .get("protocol")
                .and_then(|p| p.as_str())
                .unwrap_or("auto")
                .to_owned();
            let era = match protocol.as_str() {
                "auto" => learned.get(&name).copied().unwrap_or(Era::Unknown.as_str()),
                v if mcpgate_jsonrpc::mcp::is_modern_version(v) => Era::Modern.as_str(),
                _ => Era::Session.as_str(),
            };
            let pooled: Vec<serde_json::Value> = pools
                .iter()
                .filter(|(_, server, _, _)| *server == name)
                .map(|(principal, _, live, busy)| {
                    json!({"principal": principal, "children": live, "in_use": busy})
                })
                .collect();
            Some(json!({
                "name": name,
                "transport": s.get("transport"),
                "protocol": protocol,
                "era": era,
                "pooled": pooled,
            }))
        })
        .collect();
    json_response(StatusCode::OK, &out)
}

/// `GET /api/stdio`: the stdio commands whose children keep dying at start — failures in
/// a row, the backoff left, and how the last child ended with its last stderr lines.
fn failing_starts(state: &State) -> Response<Body> {
    let out: Vec<serde_json::Value> = state
        .table
        .failing_starts()
        .into_iter()
        .map(|(command, s)| {
            json!({
                "command": command,
                "failures": s.failures,
                "retry_in_ms": millis(s.retry_in),
                "last": s.last,
            })
        })
        .collect();
    json_response(StatusCode::OK, &out)
}

/// `GET /api/sessions`: oldest first.
fn list(state: &State) -> Response<Body> {
    let mut sessions = state.table.sessions();
    sessions.sort_by_key(|s| std::cmp::Reverse(s.age()));
    let out: Vec<Summary> = sessions.iter().map(|s| state.summary(s)).collect();
    json_response(StatusCode::OK, &out)
}

/// `DELETE /api/sessions/{prefix}`: ends the one session whose id starts with `prefix`
/// through the normal teardown path and waits for it.
async fn end(state: &State, prefix: &str) -> Response<Body> {
    if prefix.len() < MIN_PREFIX {
        return error(
            StatusCode::BAD_REQUEST,
            &format!("an id prefix needs at least {MIN_PREFIX} characters"),
        );
    }
    if prefix.len() > 128
        || !prefix
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return error(StatusCode::BAD_REQUEST, "not a session id prefix");
    }
    let matches: Vec<Arc<Session>> = state
        .table
        .sessions()
        .into_iter()
        .filter(|s| s.id().starts_with(prefix))
        .collect();
    let session = match matches.as_slice() {
        [] => return error(StatusCode::NOT_FOUND, "no session with that id prefix"),
        [one] => one.clone(),
        many => {
            let body = json!({
                "error": "more than one session has that id prefix; give more characters",
                "matches": many.len(),
            });
            return json_response(StatusCode::CONFLICT, &body);
        }
    };
    let summary = state.summary(&session);
    info!(session = %session.tag(), server = %session.server(), "admin: ending session");
    session.close(CloseReason::Admin).await;
    json_response(StatusCode::OK, &summary)
}

fn dashboard() -> Response<Body> {
    let mut r = Response::new(Full::new(Bytes::from_static(DASHBOARD.as_bytes())));
    let h = r.headers_mut();
    h.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    h.insert(
        CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(DASHBOARD_CSP),
    );
    h.insert(X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    common(r)
}

/// A handler's status and document.
fn answer((status, doc): (StatusCode, serde_json::Value)) -> Response<Body> {
    json_response(status, &doc)
}

fn json_response<T: Serialize + ?Sized>(status: StatusCode, v: &T) -> Response<Body> {
    let body = match serde_json::to_vec(v) {
        Ok(b) => b,
        Err(_) => return text(StatusCode::INTERNAL_SERVER_ERROR, "cannot encode\n"),
    };
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    common(r)
}

fn error(status: StatusCode, msg: &str) -> Response<Body> {
    json_response(status, &json!({ "error": msg }))
}

fn unauthorized(denied: auth::Denied) -> Response<Body> {
    let mut r = error(StatusCode::UNAUTHORIZED, denied.message());
    r.headers_mut().insert(
        WWW_AUTHENTICATE,
        HeaderValue::from_static(denied.challenge()),
    );
    r
}

fn not_allowed(allow: &'static str) -> Response<Body> {
    let mut r = error(StatusCode::METHOD_NOT_ALLOWED, "method not allowed");
    r.headers_mut()
        .insert(ALLOW, HeaderValue::from_static(allow));
    r
}

fn text(status: StatusCode, body: &'static str) -> Response<Body> {
    let mut r = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    *r.status_mut() = status;
    r.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    common(r)
}

/// Headers on every answer: nothing is cached, nothing is sniffed.
fn common(mut r: Response<Body>) -> Response<Body> {
    let h = r.headers_mut();
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    r
}
