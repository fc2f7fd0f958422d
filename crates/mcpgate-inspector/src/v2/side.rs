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

    /// `POST /api/fetch`.
    pub(crate) async fn fetch(&self, body: &[u8]) -> Response<Body> {
        let req: FetchReq = match serde_json::from_slice(body) {
            Ok(r) => r,
            Err(e) => return error(StatusCode::BAD_REQUEST, format!("Invalid JSON body: {e}")),
        };
        let Some(raw) = req.url else {
            return error(StatusCode::BAD_REQUEST, "Missing url");
        };
        let url = match reqwest::Url::parse(&raw) {
            Ok(u) => u,
            Err(e) => return error(StatusCode::BAD_REQUEST, format!("url: {e}")),
        };
        let shown = ssrf::shown(&url);
        if let Err(e) = ssrf::check_url(&url, &self.allow) {
            warn!(url = %shown, "inspector: /api/fetch refused: {e}");
            return error(StatusCode::FORBIDDEN, e.to_string());
        }
        let method = match Method::from_bytes(req.method.as_deref().unwrap_or("GET").as_bytes()) {
            Ok(m) => m,
            Err(_) => return error(StatusCode::BAD_REQUEST, "invalid method"),
        };
        let mut rb = self.client.request(method, url);
        for (k, v) in &req.headers {
            let lower = k.to_ascii_lowercase();
            // The backend's own credentials and hop-by-hop headers never ride along.
            if HOP_BY_HOP.contains(&lower.as_str())
                || lower.starts_with("proxy-")
                || matches!(lower.as_str(), "x-mcp-remote-auth" | "cookie")
            {
                continue;
            }
            let (Ok(name), Ok(value)) = (
                http::HeaderName::from_bytes(k.as_bytes()),
                http::HeaderValue::from_str(v),
            ) else {
                return error(
                    StatusCode::BAD_REQUEST,
                    format!("header {k:?} is not valid"),
                );
            };
            rb = rb.header(name, value);
        }
        if let Some(b) = req.body {
            rb = rb.body(b);
        }
        if let Some(ms) = req.timeout_ms.filter(|m| m.is_finite() && *m >= 0.0) {
            rb = rb.timeout(Duration::from_millis(ms.min(300_000.0) as u64));
        }
        let res = match rb.send().await {
            Ok(r) => r,
            Err(e) => {
                let e = e.without_url();
                let why = format!("{shown}: {}", chain(&e));
                warn!(url = %shown, "inspector: /api/fetch failed: {why}");
                let status = if ssrf::Refused::in_chain(&e) {
                    StatusCode::FORBIDDEN
                } else if e.is_builder() {
                    StatusCode::BAD_REQUEST
                } else if e.is_timeout() {
                    StatusCode::GATEWAY_TIMEOUT
                } else {
                    StatusCode::BAD_GATEWAY
                };
                return error(status, why);
            }
        };
        let status = res.status();
        let mut headers = serde_json::Map::new();
        for (k, v) in res.headers() {
            let Ok(v) = v.to_str() else { continue };
            // Repeated headers joined as fetch's `Headers` does.
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
        let body = if ctype.contains("text/event-stream") || ctype.contains("application/x-ndjson")
        {
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
