//! The Inspector 1.x proxy protocol: the backend protocol of the MCP Inspector web UI (npm
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

use std::collections::BTreeMap;
use std::sync::Arc;

use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use mcpgate_jsonrpc::mcp;
use mcpgate_server::Front;
use mcpgate_server::body::{Body, ReqBody, json};
use mcpgate_session::ServerSpec;
use reqwest::Url;

use crate::args::{forwarded_headers, parse_env, split_args};
use crate::guard::{refuse, refuse_with};
use crate::inspector::Inspector;
use crate::policy::{Allowed, Refusal, UpstreamTransport, bad_request, decided};

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

/// The decoded query parameters (`+` is a space, as the UI's `URLSearchParams` writes it).
pub(crate) fn query(req: &Request<ReqBody>) -> BTreeMap<String, String> {
    let q = req.uri().query().unwrap_or("");
    Url::parse(&format!("http://q/?{q}"))
        .map(|u| u.query_pairs().into_owned().collect())
        .unwrap_or_default()
}

impl Inspector {
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

    /// The stdio target of a query's `command`, `args` (one string) and `env` (JSON).
    fn stdio_query(&self, q: &BTreeMap<String, String>) -> Result<Allowed, Refusal> {
        let command = q
            .get("command")
            .map(|c| c.trim())
            .filter(|c| !c.is_empty())
            .ok_or_else(|| bad_request("command query parameter is required".into()))?;
        let args = split_args(q.get("args").map_or("", String::as_str))
            .map_err(|e| bad_request(e.into()))?;
        let env = parse_env(q.get("env").map(String::as_str))?;
        self.policy.stdio_parsed(command, &args, &env)
    }

    /// The session spec of a new connection, from its query, if the allowlist allows it.
    fn spec_from_query(
        &self,
        req: &Request<ReqBody>,
        fallback: Option<UpstreamTransport>,
    ) -> Result<Arc<ServerSpec>, Refusal> {
        let q = query(req);
        let transport = UpstreamTransport::from_ui(
            q.get("transportType").map(String::as_str),
            "transportType query parameter",
            fallback,
        )?;
        let allowed = match transport {
            UpstreamTransport::Stdio => self.stdio_query(&q),
            t => self.policy.url_with(
                t,
                q.get("url").map(String::as_str),
                forwarded_headers(req.headers()),
            ),
        };
        decided(allowed, self.guard.token.is_some()).map(Arc::new)
    }
}

/// The CORS preflight answer for an allowed origin.
fn preflight(req: &Request<ReqBody>) -> Response<Body> {
    let mut r = mcpgate_server::body::status(StatusCode::NO_CONTENT);
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

/// Answers one request in inspector mode (every path the front does not serve itself).
pub(crate) async fn handle(
    front: &Arc<Front>,
    insp: &Inspector,
    req: Request<ReqBody>,
    peer: std::net::IpAddr,
) -> Response<Body> {
    let Some(ep) = endpoint(req.uri().path()) else {
        return refuse(StatusCode::NOT_FOUND, "Not Found");
    };
    let origin = match insp.guard.check_browser(req.headers()) {
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
    req: Request<ReqBody>,
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
    if let Err(r) = insp.guard.check_token(req.headers()) {
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
                (Some(id), _) => front.session_server(Some(&id)),
                // A POST without a session may be an initialize: it opens the query's target.
                (None, Method::POST) => match insp.spec_from_query(&req, None) {
                    Ok(s) => s,
                    Err(r) => return refuse_with(r),
                },
                (None, _) => front.session_server(None),
            };
            front.serve_mcp(&spec, req, who, peer).await
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
            front.open_sse(&spec, req.headers(), "/message", who).await
        }
        (Endpoint::Message, Method::POST) => front.post_message(req, who).await,
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
