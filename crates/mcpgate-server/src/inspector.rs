//! Inspector-proxy mode: the backend protocol of the MCP Inspector web UI (npm
//! `@modelcontextprotocol/inspector` 1.0.x), so that the real UI can use mcpgate as its
//! proxy. The caller picks the target of each session in the query (`transportType` and
//! `url`, or `command`/`args`/`env`), within an allowlist; every connection then becomes an
//! ordinary mcpgate session with its own dedicated upstream session (a child process per
//! session for stdio), served by the same Streamable HTTP and legacy SSE code and ended by
//! the same teardown path as every other session.
//!
//! Endpoints (the UI's names):
//! - `GET /health` → `{"status":"ok"}` (no token needed; Origin checked);
//! - `GET /config` → the UI's defaults (`defaultCommand`, `defaultArgs`, …);
//! - `/mcp?transportType=…&url=…` (or `command`/`args`/`env`): Streamable HTTP
//!   (POST/GET/DELETE), the target read when `initialize` arrives without a session;
//! - `GET /stdio?command=…&args=…&env=…` and `GET /sse?url=…`: a legacy SSE stream whose
//!   `endpoint` event names `/message?sessionId=…`;
//! - `POST /message?sessionId=…`;
//! - `OPTIONS` on each of them: the CORS preflight.
//!
//! Guards, in this order: `Host` must be a loopback name; a browser's same-origin request
//! (`Sec-Fetch-Site: same-origin`) is refused; an `Origin` must be one of the UI's origins
//! (and is required when authentication is off); every endpoint but `/health` needs
//! `X-MCP-Proxy-Auth: Bearer <token>`, compared in constant time; the target must be in the
//! allowlist ([`policy`]). Refusals are JSON-RPC error bodies (code -32000): 403 for Host,
//! Origin and allowlist, 401 for the token, 400 for malformed queries, 404 for unknown paths.

mod policy;

use std::collections::BTreeMap;
use std::sync::Arc;

use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode, header};
use hyper::body::Incoming;
use mcpgate_jsonrpc::{JsonRpcError, error as code, mcp};
use mcpgate_session::ServerSpec;
use mcpgate_upstream::Target;
use reqwest::Url;
use subtle::ConstantTimeEq;
use tracing::{info, warn};

use crate::body::{Body, json};
use crate::config::FrontConfig;
use crate::front::{Fallback, Front};
use crate::request::Who;
use mcpgate_session::SessionTable;
use policy::{Policy, Refusal, UpstreamTransport};
pub use policy::{StdioRule, UrlRule, literal_pattern, quote_args};

/// The header the Inspector UI carries its proxy session token in.
pub const TOKEN_HEADER: &str = "x-mcp-proxy-auth";

/// How callers prove they may use the proxy.
#[derive(Clone)]
pub enum ProxyAuth {
    /// `X-MCP-Proxy-Auth: Bearer <token>` on every request but `/health`.
    Token(String),
    /// No token at all. Only ever from an explicit option; requests must then carry an
    /// allowed `Origin`.
    DangerouslyDisabled,
}

impl std::fmt::Debug for ProxyAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProxyAuth::Token(_) => f.write_str("Token(<redacted>)"),
            ProxyAuth::DangerouslyDisabled => f.write_str("DangerouslyDisabled"),
        }
    }
}

/// What `GET /config` tells the UI to prefill.
#[derive(Debug, Clone, Default)]
pub struct InspectorDefaults {
    /// `stdio`, `sse` or `streamable-http`.
    pub transport: Option<String>,
    /// The command.
    pub command: Option<String>,
    /// The arguments, as the UI's single string (see [`quote_args`]).
    pub args: Option<String>,
    /// The server URL.
    pub server_url: Option<String>,
}

/// The configuration of Inspector-proxy mode.
#[derive(Debug, Clone)]
pub struct InspectorConfig {
    /// The token check.
    pub auth: ProxyAuth,
    /// The origins the UI is served from (`http://localhost:6274`); others get 403.
    pub ui_origins: Vec<String>,
    /// The stdio commands callers may start.
    pub stdio: Vec<StdioRule>,
    /// The upstream URLs callers may open.
    pub urls: Vec<UrlRule>,
    /// The environment every spawned command starts from (the gateway's own environment is
    /// never passed on): name → value.
    pub base_env: BTreeMap<String, String>,
    /// What `/config` answers.
    pub defaults: InspectorDefaults,
}

impl InspectorConfig {
    /// Checks the allowlist; the message says what is wrong.
    pub fn validate(&self) -> Result<(), String> {
        if self.ui_origins.is_empty() {
            return Err("at least one UI origin is needed".into());
        }
        for o in &self.ui_origins {
            let u = Url::parse(o).map_err(|e| format!("UI origin {o:?}: {e}"))?;
            if !matches!(u.scheme(), "http" | "https") || u.host_str().is_none() {
                return Err(format!("UI origin {o:?} must be http(s)://host[:port]"));
            }
            if normalize_origin(o) != u.origin().ascii_serialization() {
                return Err(format!(
                    "UI origin {o:?} must be just scheme://host[:port] (e.g. {})",
                    u.origin().ascii_serialization()
                ));
            }
        }
        if let ProxyAuth::Token(t) = &self.auth
            && t.len() < 16
        {
            return Err("the proxy token must be at least 16 characters".into());
        }
        policy::validate(&self.stdio, &self.urls, &self.base_env).map(|_| ())
    }
}

/// The runtime form of [`InspectorConfig`].
pub(crate) struct Inspector {
    token: Option<Vec<u8>>,
    origins: Vec<String>,
    policy: Policy,
    defaults: InspectorDefaults,
    /// The principal of every inspector session (one token, one principal).
    who: Who,
}

impl std::fmt::Debug for Inspector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inspector")
            .field("origins", &self.origins)
            .finish_non_exhaustive()
    }
}

impl Inspector {
    /// Builds the runtime form. A configuration that does not validate leaves the
    /// allowlist empty (everything refused) and is logged.
    pub(crate) fn new(cfg: InspectorConfig) -> Self {
        let urls = match policy::validate(&cfg.stdio, &cfg.urls, &cfg.base_env) {
            Ok(u) => u,
            Err(e) => {
                warn!("inspector allowlist invalid, refusing every target: {e}");
                Vec::new()
            }
        };
        let (token, who) = match cfg.auth {
            ProxyAuth::Token(t) => (Some(t.into_bytes()), Some(Arc::from("inspector"))),
            ProxyAuth::DangerouslyDisabled => (None, None),
        };
        Inspector {
            token,
            origins: cfg.ui_origins.iter().map(|o| normalize_origin(o)).collect(),
            policy: Policy {
                stdio: cfg.stdio,
                urls,
                base_env: cfg.base_env,
            },
            defaults: cfg.defaults,
            who,
        }
    }
}

fn normalize_origin(o: &str) -> String {
    o.trim().trim_end_matches('/').to_ascii_lowercase()
}

/// The inspector endpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Endpoint {
    Health,
    Config,
    Mcp,
    Stdio,
    Sse,
    Message,
    Fetch,
}

fn endpoint(path: &str) -> Option<Endpoint> {
    let path = path
        .strip_suffix('/')
        .filter(|p| !p.is_empty())
        .unwrap_or(path);
    Some(match path {
        "/health" => Endpoint::Health,
        "/config" => Endpoint::Config,
        "/mcp" => Endpoint::Mcp,
        "/stdio" => Endpoint::Stdio,
        "/sse" => Endpoint::Sse,
        "/message" | "/messages" => Endpoint::Message,
        "/fetch" => Endpoint::Fetch,
        _ => return None,
    })
}

/// A JSON-RPC error body with `status`.
fn refuse(status: StatusCode, msg: impl Into<String>) -> Response<Body> {
    json(
        status,
        JsonRpcError::new(code::BAD_REQUEST, msg).to_body(None),
    )
}

fn refuse_with((status, msg): Refusal) -> Response<Body> {
    refuse(status, msg)
}

/// Whether a `Host` value names this loopback listener.
fn loopback_host(host: &str) -> bool {
    let h = host.trim().to_ascii_lowercase();
    let name = if let Some(rest) = h.strip_prefix('[') {
        rest.split_once(']').map_or(h.as_str(), |(ip, _)| ip)
    } else {
        h.rsplit_once(':').map_or(h.as_str(), |(n, port)| {
            if port.bytes().all(|b| b.is_ascii_digit()) {
                n
            } else {
                h.as_str()
            }
        })
    };
    name == "localhost"
        || name == "::1"
        || name
            .parse::<std::net::Ipv4Addr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The decoded query parameters (`+` is a space, as the UI's `URLSearchParams` writes it).
fn query(req: &Request<Incoming>) -> BTreeMap<String, String> {
    let q = req.uri().query().unwrap_or("");
    Url::parse(&format!("http://q/?{q}"))
        .map(|u| u.query_pairs().into_owned().collect())
        .unwrap_or_default()
}

impl Inspector {
    /// The browser guards: Host, fetch metadata and Origin. `Ok(Some(origin))` is the
    /// allowed origin to answer CORS for.
    fn check_browser(&self, h: &HeaderMap) -> Result<Option<HeaderValue>, Box<Response<Body>>> {
        if let Some(host) = h.get(header::HOST)
            && !host.to_str().is_ok_and(loopback_host)
        {
            warn!(host = ?host, "inspector: Host not allowed");
            return Err(Box::new(refuse(
                StatusCode::FORBIDDEN,
                "Forbidden: Host not allowed (the inspector proxy answers to loopback names only)",
            )));
        }
        if h.get("sec-fetch-site")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("same-origin"))
        {
            warn!("inspector: same-origin browser request refused");
            return Err(Box::new(refuse(
                StatusCode::FORBIDDEN,
                "Forbidden: same-origin browser requests are not accepted",
            )));
        }
        match h.get(header::ORIGIN) {
            Some(o) => {
                let ok = o
                    .to_str()
                    .is_ok_and(|s| self.origins.iter().any(|a| *a == normalize_origin(s)));
                if ok {
                    Ok(Some(o.clone()))
                } else {
                    warn!(origin = ?o, "inspector: Origin not allowed");
                    Err(Box::new(refuse(
                        StatusCode::FORBIDDEN,
                        "Forbidden: Origin not allowed (not the Inspector UI's origin; see --ui-origin)",
                    )))
                }
            }
            None if self.token.is_none() => {
                warn!("inspector: request without Origin refused (authentication is off)");
                Err(Box::new(refuse(
                    StatusCode::FORBIDDEN,
                    "Forbidden: an Origin header is required while authentication is disabled",
                )))
            }
            None => Ok(None),
        }
    }

    /// The token check.
    fn check_token(&self, h: &HeaderMap) -> Result<(), Box<Response<Body>>> {
        let Some(expected) = &self.token else {
            return Ok(());
        };
        let given = h
            .get(TOKEN_HEADER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| {
                v.split_once(' ')
                    .filter(|(s, _)| s.eq_ignore_ascii_case("bearer"))
                    .map(|(_, t)| t.trim())
            });
        let ok = given.is_some_and(|t| bool::from(t.as_bytes().ct_eq(expected)));
        if ok {
            return Ok(());
        }
        info!(
            present = given.is_some(),
            "inspector: missing or wrong proxy token"
        );
        let mut r = refuse(
            StatusCode::UNAUTHORIZED,
            "Authentication required. Use the session token printed by mcpgate inspector at start \
             (header X-MCP-Proxy-Auth: Bearer <token>; in the UI: Configuration → Proxy Session Token)",
        );
        r.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"mcpgate-inspector\""),
        );
        Err(Box::new(r))
    }

    /// `GET /config`.
    fn config(&self) -> Response<Body> {
        let d = &self.defaults;
        let body = serde_json::json!({
            // The gateway's environment is never shown or passed on; the UI's env editor
            // starts empty and only allowed names are accepted.
            "defaultEnvironment": {},
            "defaultCommand": d.command.clone().unwrap_or_default(),
            "defaultArgs": d.args.clone().unwrap_or_default(),
            "defaultTransport": d.transport.clone().unwrap_or_default(),
            "defaultServerUrl": d.server_url.clone().unwrap_or_default(),
        });
        json(StatusCode::OK, body.to_string())
    }

    /// The session spec of a new connection, from its query, if the allowlist allows it.
    fn spec_from_query(
        &self,
        req: &Request<Incoming>,
        fallback: Option<UpstreamTransport>,
    ) -> Result<Arc<ServerSpec>, Refusal> {
        let q = query(req);
        let transport = match q.get("transportType").map(String::as_str) {
            Some(t) => UpstreamTransport::parse(t).ok_or_else(|| {
                (
                    StatusCode::BAD_REQUEST,
                    format!("transportType {t:?} is not one of stdio, sse, streamable-http"),
                )
            })?,
            None => fallback.ok_or_else(|| {
                (
                    StatusCode::BAD_REQUEST,
                    "transportType query parameter is required (stdio, sse or streamable-http)"
                        .to_owned(),
                )
            })?,
        };
        let allowed = match transport {
            UpstreamTransport::Stdio => self.policy.stdio(
                q.get("command").map(String::as_str),
                q.get("args").map(String::as_str),
                q.get("env").map(String::as_str),
            ),
            t => self
                .policy
                .url(t, q.get("url").map(String::as_str), req.headers()),
        }
        .inspect_err(|(status, msg)| {
            warn!(status = status.as_u16(), "inspector: target refused: {msg}");
        })?;
        if self.token.is_none() {
            warn!(server = %allowed.label, "inspector: opening a session without authentication (--dangerously-omit-auth): {}", allowed.summary);
        } else {
            info!(server = %allowed.label, "inspector: target allowed: {}", allowed.summary);
        }
        Ok(Arc::new(ServerSpec::new(allowed.label, allowed.target)))
    }
}

/// The spec to look an existing session up with: its own server label. The target is never
/// used (only a request without a session opens one, and those take the query's target).
fn existing(front: &Front, id: Option<&str>) -> Arc<ServerSpec> {
    let name = id
        .and_then(|id| front.table.get(id))
        .map_or_else(|| "inspector".to_owned(), |s| s.server().to_owned());
    Arc::new(ServerSpec::new(
        name,
        Target::Http {
            url: String::new(),
            headers: Vec::new(),
            http: Default::default(),
        },
    ))
}

/// The CORS preflight answer for an allowed origin.
fn preflight(req: &Request<Incoming>) -> Response<Body> {
    let mut r = crate::body::status(StatusCode::NO_CONTENT);
    let h = r.headers_mut();
    h.insert(
        header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static("GET, POST, DELETE, OPTIONS"),
    );
    // The UI sends its own headers (the token, MCP headers) and the user's custom upstream
    // headers, whose names only it knows: the requested names are allowed, for an allowed
    // origin only.
    let requested = req
        .headers()
        .get(header::ACCESS_CONTROL_REQUEST_HEADERS)
        .cloned()
        .unwrap_or_else(|| {
            HeaderValue::from_static(
                "x-mcp-proxy-auth, content-type, accept, mcp-session-id, mcp-protocol-version, last-event-id, authorization",
            )
        });
    h.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, requested);
    h.insert(
        header::ACCESS_CONTROL_MAX_AGE,
        HeaderValue::from_static("600"),
    );
    if req
        .headers()
        .get("access-control-request-private-network")
        .is_some_and(|v| v == "true")
    {
        h.insert(
            "access-control-allow-private-network",
            HeaderValue::from_static("true"),
        );
    }
    r
}

impl Front {
    /// A front in Inspector-proxy mode ([`crate::InspectorConfig`]): no configured
    /// servers; each session's target comes from the caller, within the allowlist.
    pub fn new_inspector(
        table: SessionTable,
        cfg: FrontConfig,
        inspector: InspectorConfig,
    ) -> Result<Arc<Self>, mcpgate_tls::TlsError> {
        let mut front = Self::new(table, Vec::new(), None, cfg)?;
        if let Some(f) = Arc::get_mut(&mut front) {
            f.fallback = Some(Box::new(Inspector::new(inspector)));
        }
        Ok(front)
    }
}

impl Fallback for Inspector {
    fn serve<'a>(
        &'a self,
        front: &'a Arc<Front>,
        req: Request<Incoming>,
        conn: crate::front::Conn,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Response<Body>> + Send + 'a>> {
        Box::pin(handle(front, self, req, conn.peer.ip()))
    }
}

/// Answers one request in inspector mode (every path the front does not serve itself).
pub(crate) async fn handle(
    front: &Arc<Front>,
    insp: &Inspector,
    req: Request<Incoming>,
    peer: std::net::IpAddr,
) -> Response<Body> {
    let Some(ep) = endpoint(req.uri().path()) else {
        return refuse(StatusCode::NOT_FOUND, "Not Found");
    };
    let origin = match insp.check_browser(req.headers()) {
        Ok(o) => o,
        Err(r) => return *r,
    };
    let mut resp = if req.method() == Method::OPTIONS {
        preflight(&req)
    } else {
        route(front, insp, ep, req, peer).await
    };
    if let Some(o) = origin {
        let h = resp.headers_mut();
        h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, o);
        h.insert(
            header::ACCESS_CONTROL_EXPOSE_HEADERS,
            HeaderValue::from_static("mcp-session-id, mcp-protocol-version, www-authenticate"),
        );
        h.append(header::VARY, HeaderValue::from_static("Origin"));
    }
    resp
}

async fn route(
    front: &Arc<Front>,
    insp: &Inspector,
    ep: Endpoint,
    req: Request<Incoming>,
    peer: std::net::IpAddr,
) -> Response<Body> {
    let method = req.method().clone();
    if ep == Endpoint::Health {
        return if method == Method::GET {
            json(StatusCode::OK, r#"{"status":"ok"}"#)
        } else {
            refuse(StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed")
        };
    }
    if let Err(r) = insp.check_token(req.headers()) {
        return *r;
    }
    let who = &insp.who;
    match (ep, method) {
        (Endpoint::Config, Method::GET) => insp.config(),
        (Endpoint::Mcp, m) => {
            let sid = req
                .headers()
                .get(mcp::SESSION_ID_HEADER)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            let spec = match (sid, m) {
                (Some(id), _) => existing(front, Some(&id)),
                // A POST without a session may be an initialize: it opens the query's target.
                (None, Method::POST) => match insp.spec_from_query(&req, None) {
                    Ok(s) => s,
                    Err(r) => return refuse_with(r),
                },
                (None, _) => existing(front, None),
            };
            crate::era::handle(front, &spec, req, who, None, peer).await
        }
        (Endpoint::Stdio | Endpoint::Sse, Method::GET) => {
            let fallback = if ep == Endpoint::Stdio {
                UpstreamTransport::Stdio
            } else {
                UpstreamTransport::Sse
            };
            let spec = match insp.spec_from_query(&req, Some(fallback)) {
                Ok(s) => s,
                Err(r) => return refuse_with(r),
            };
            // The endpoint event names a path on this origin; a caller's `proxyFullAddress`
            // is ignored (the UI resolves the path against the address it connected to).
            crate::legacy::open(front, &spec, req.headers(), "/message", who)
                .await
                .unwrap_or_else(|e| {
                    info!(server = %spec.name, error = %e, "inspector: session not opened");
                    e.into_response(None)
                })
        }
        (Endpoint::Message, Method::POST) => {
            let q = query(&req);
            let spec = existing(front, q.get("sessionId").map(String::as_str));
            crate::legacy::post(front, &spec, req, who)
                .await
                .unwrap_or_else(|e| {
                    info!(error = %e, "inspector: legacy message refused");
                    e.into_response(None)
                })
        }
        (Endpoint::Fetch, _) => refuse(
            StatusCode::NOT_FOUND,
            "Not Found: mcpgate inspector does not fetch arbitrary URLs for the UI (/fetch); \
             OAuth discovery through the proxy is not supported",
        ),
        (Endpoint::Config | Endpoint::Health, _) => {
            refuse(StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed")
        }
        (Endpoint::Stdio | Endpoint::Sse, _) => {
            refuse(StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed")
        }
        (Endpoint::Message, _) => refuse(StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed"),
    }
}

#[cfg(test)]
mod tests;
