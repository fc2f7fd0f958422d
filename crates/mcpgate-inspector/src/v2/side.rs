//! The UI's side routes: `/api/storage/:id` (its settings, kept in memory by this
//! backend), `/api/log` (its log lines, into the gateway's log), `/api/fetch` (the HTTP
//! relay it uses for OAuth discovery and token requests, behind the SSRF guard).

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Response, StatusCode};
use mcpgate_server::body::{Body, json};
use serde::Deserialize;
use serde_json::{Value, json};
use tracing::{debug, error as log_error, info, warn};

use crate::error::{InspectorError, chain};
use crate::ssrf::{self, FetchAllow};
use crate::v2::reply::{error, ok};

/// Largest stored document, and how many stores at once.
const MAX_STORE: usize = 4 << 20;
const MAX_STORES: usize = 64;
/// Largest relayed response body.
const MAX_FETCHED: usize = 4 << 20;
/// All stores together.
const MAX_STORES_BYTES: usize = 16 << 20;
/// Headers a relayed request never carries: they describe the connection to the backend.
const HOP_BY_HOP: &[&str] = &[
    "host",
    "connection",
    "content-length",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "keep-alive",
    "expect",
];

/// The UI's stores, in memory: they last as long as the backend.
#[derive(Default)]
pub(crate) struct Stores(Mutex<HashMap<String, Bytes>>);

fn valid_store_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && id != "__proto__"
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

impl Stores {
    /// `GET|POST|DELETE /api/storage/:id`.
    pub(crate) fn serve(&self, method: &Method, id: &str, body: Bytes) -> Response<Body> {
        if !valid_store_id(id) {
            return error(StatusCode::BAD_REQUEST, "Invalid storeId");
        }
        if *method == Method::POST {
            // Checked before the lock is taken.
            if body.len() > MAX_STORE {
                return error(StatusCode::PAYLOAD_TOO_LARGE, "Storage payload too large");
            }
            if !serde_json::from_slice::<Value>(&body).is_ok_and(|v| v.is_object()) {
                return error(StatusCode::BAD_REQUEST, "Invalid JSON body");
            }
        }
        let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        match *method {
            Method::GET => match map.get(id) {
                Some(b) => json(StatusCode::OK, b.clone()),
                None => ok(json!({})),
            },
            Method::POST => {
                let others: usize = map
                    .iter()
                    .filter(|(k, _)| k.as_str() != id)
                    .map(|(_, v)| v.len())
                    .sum();
                if (!map.contains_key(id) && map.len() >= MAX_STORES)
                    || others + body.len() > MAX_STORES_BYTES
                {
                    return error(
                        StatusCode::INSUFFICIENT_STORAGE,
                        "Too many or too large stores",
                    );
                }
                map.insert(id.to_owned(), body);
                ok(json!({ "ok": true }))
            }
            Method::DELETE => {
                map.remove(id);
                ok(json!({ "ok": true }))
            }
            _ => error(StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed"),
        }
    }
}

/// `POST /api/log`: the UI's pino-style event `{level: {label}, messages: [...]}`.
pub(crate) fn log(body: &[u8]) -> Response<Body> {
    let v: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let level = v["level"]["label"].as_str().unwrap_or("info");
    let msg = match &v["messages"] {
        Value::Array(m) => m
            .iter()
            .map(|x| x.as_str().map_or_else(|| x.to_string(), str::to_owned))
            .collect::<Vec<_>>()
            .join(" "),
        _ => String::new(),
    };
    // Bounded: a log line is not a place for a document.
    let msg: String = msg.chars().take(2000).collect();
    // Quoted: a line break in the UI's text cannot forge a log line.
    match level {
        "error" | "fatal" => log_error!(target: "inspector_ui", "{msg:?}"),
        "warn" => warn!(target: "inspector_ui", "{msg:?}"),
        "debug" | "trace" => debug!(target: "inspector_ui", "{msg:?}"),
        _ => info!(target: "inspector_ui", "{msg:?}"),
    }
    ok(json!({ "ok": true }))
}

/// `fetch`'s body.
#[derive(Deserialize)]
struct FetchReq {
    url: Option<String>,
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    #[serde(default)]
    body: Option<String>,
    #[serde(rename = "timeoutMs")]
    timeout_ms: Option<f64>,
}

/// The relay: its client (guarded resolver and redirects) and what it may reach.
pub(crate) struct Fetcher {
    client: reqwest::Client,
    allow: FetchAllow,
}

impl Fetcher {
    /// The relay reaching `allow` besides public addresses.
    pub(crate) fn new(allow: FetchAllow) -> Result<Self, InspectorError> {
        Ok(Fetcher {
            client: ssrf::client(allow.clone())?,
            allow,
        })
    }

    /// `POST /api/fetch`: the request checked and built, sent, and the answer relayed.
    pub(crate) async fn fetch(&self, body: &[u8]) -> Response<Body> {
        let (rb, shown) = match self.request(body) {
            Ok(r) => r,
            Err(e) => return error(e.status(), chain(&e)),
        };
        match rb.send().await {
            Ok(res) => relayed(res, &shown).await,
            Err(e) => send_failed(&e.without_url(), &shown),
        }
    }

    /// The relayed request `body` describes, and its URL as logs show it.
    fn request(&self, body: &[u8]) -> Result<(reqwest::RequestBuilder, String), NotSent> {
        let req: FetchReq = serde_json::from_slice(body).map_err(NotSent::Json)?;
        let raw = req.url.ok_or(NotSent::NoUrl)?;
        let url = reqwest::Url::parse(&raw).map_err(NotSent::Url)?;
        let shown = ssrf::shown(&url);
        if let Err(e) = ssrf::check_url(&url, &self.allow) {
            warn!(url = %shown, "inspector: /api/fetch refused: {e}");
            return Err(NotSent::Refused(e));
        }
        let method = Method::from_bytes(req.method.as_deref().unwrap_or("GET").as_bytes())
            .map_err(|_| NotSent::Method)?;
        let mut rb = self.client.request(method, url);
        for (k, v) in &req.headers {
            if let Some((name, value)) = relayed_header(k, v)? {
                rb = rb.header(name, value);
            }
        }
        if let Some(b) = req.body {
            rb = rb.body(b);
        }
        if let Some(ms) = req.timeout_ms.filter(|m| m.is_finite() && *m >= 0.0) {
            rb = rb.timeout(Duration::from_millis(ms.min(300_000.0) as u64));
        }
        Ok((rb, shown))
    }
}

/// Why `/api/fetch` did not send the UI's request: the UI's mistake (400) or the guard's
/// refusal (403).
#[derive(Debug, thiserror::Error)]
enum NotSent {
    /// The body is not a fetch request.
    #[error("Invalid JSON body")]
    Json(#[source] serde_json::Error),
    /// No `url`.
    #[error("Missing url")]
    NoUrl,
    /// A `url` that does not parse.
    #[error("url")]
    Url(#[source] url::ParseError),
    /// A URL the SSRF guard refuses.
    #[error(transparent)]
    Refused(ssrf::Refused),
    /// A `method` that is not an HTTP method.
    #[error("invalid method")]
    Method,
    /// A header name or value that is not valid.
    #[error("header {0:?} is not valid")]
    Header(String),
}

impl NotSent {
    /// The answer's status.
    fn status(&self) -> StatusCode {
        match self {
            NotSent::Refused(_) => StatusCode::FORBIDDEN,
            _ => StatusCode::BAD_REQUEST,
        }
    }
}

/// A header of the UI's request as sent on: `None` for the backend's own credentials and
/// hop-by-hop headers, which never ride along.
fn relayed_header(
    k: &str,
    v: &str,
) -> Result<Option<(http::HeaderName, http::HeaderValue)>, NotSent> {
    let lower = k.to_ascii_lowercase();
    if HOP_BY_HOP.contains(&lower.as_str())
        || lower.starts_with("proxy-")
        || matches!(lower.as_str(), "x-mcp-remote-auth" | "cookie")
    {
        return Ok(None);
    }
    match (
        http::HeaderName::from_bytes(k.as_bytes()),
        http::HeaderValue::from_str(v),
    ) {
        (Ok(name), Ok(value)) => Ok(Some((name, value))),
        _ => Err(NotSent::Header(k.to_owned())),
    }
}

/// The answer when the relayed request failed: 403 for the guard's refusal, 400 for a
/// request reqwest would not build, 504 for a timeout, else 502; with the cause.
fn send_failed(e: &reqwest::Error, shown: &str) -> Response<Body> {
    let why = format!("{shown}: {}", chain(e));
    warn!(url = %shown, "inspector: /api/fetch failed: {why}");
    let status = if ssrf::Refused::in_chain(e) {
        StatusCode::FORBIDDEN
    } else if e.is_builder() {
        StatusCode::BAD_REQUEST
    } else if e.is_timeout() {
        StatusCode::GATEWAY_TIMEOUT
    } else {
        StatusCode::BAD_GATEWAY
    };
    error(status, why)
}

/// The server's answer as fetch's `Response` in JSON: status, headers (repeated ones
/// joined as fetch's `Headers` does) and the body (none for a stream).
async fn relayed(res: reqwest::Response, shown: &str) -> Response<Body> {
    let status = res.status();
    let mut headers = serde_json::Map::new();
    for (k, v) in res.headers() {
        let Ok(v) = v.to_str() else { continue };
        let joined = match headers.get(k.as_str()).and_then(Value::as_str) {
            Some(prev) => format!("{prev}, {v}"),
            None => v.to_owned(),
        };
        headers.insert(k.as_str().to_owned(), Value::from(joined));
    }
    let ctype = res
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let body = if ctype.contains("text/event-stream") || ctype.contains("application/x-ndjson") {
        None
    } else {
        match read_capped(res).await {
            Ok(b) => Some(b),
            Err(e) => return error(StatusCode::BAD_GATEWAY, chain(&e)),
        }
    };
    debug!(url = %shown, status = status.as_u16(), "inspector: /api/fetch relayed");
    ok(json!({
        "ok": status.is_success(),
        "status": status.as_u16(),
        "statusText": status.canonical_reason().unwrap_or(""),
        "headers": headers,
        "body": body,
    }))
}

/// Why a relayed response's body was not read.
#[derive(Debug, thiserror::Error)]
enum BodyError {
    /// The server's body broke off (its causes say how).
    #[error(transparent)]
    Read(reqwest::Error),
    /// More than a relayed response may hold.
    #[error("the response exceeds the {MAX_FETCHED}-byte limit for a relayed response")]
    TooLarge,
}

/// The body of `res`, at most [`MAX_FETCHED`] bytes, as text.
async fn read_capped(mut res: reqwest::Response) -> Result<String, BodyError> {
    let mut buf = Vec::new();
    while let Some(chunk) = res
        .chunk()
        .await
        .map_err(|e| BodyError::Read(e.without_url()))?
    {
        if buf.len() + chunk.len() > MAX_FETCHED {
            return Err(BodyError::TooLarge);
        }
        buf.extend_from_slice(&chunk);
    }
    Ok(String::from_utf8_lossy(&buf).into_owned())
}
