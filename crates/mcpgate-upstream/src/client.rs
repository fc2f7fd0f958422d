//! The HTTP clients upstream sessions use: one connection pool per distinct set of
//! [`HttpOptions`] (TLS trust and identity, proxy), shared by every session of the servers
//! configured alike — connection pools are the only thing sessions share upstream.
//!
//! Redirects: a `307`/`308` to the **same origin** is followed (a server that moved
//! `/mcp` to `/mcp/`); anything else — another origin (the configured credentials must not
//! leave the configured server), a `301`/`302`/`303` (which would turn a POST into a GET)
//! — is not followed and becomes an error that names the target.
//!
//! Proxies: `HTTPS_PROXY` / `HTTP_PROXY` / `ALL_PROXY` / `NO_PROXY` from the environment
//! (the usual meaning; loopback is not exempt unless `NO_PROXY` lists it), or a proxy URL
//! per server, or none.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use crate::error::{UpstreamError, chain};

/// Which proxy an HTTP upstream is reached through.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub enum ProxyMode {
    /// From `HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY` and `NO_PROXY` (either case).
    #[default]
    Env,
    /// Never a proxy.
    Off,
    /// This proxy (`http://host:port`, credentials allowed in the URL).
    Url(String),
}

/// How an HTTP server is reached: TLS and proxy.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct HttpOptions {
    /// Certificate verification and client identity.
    pub tls: mcpgate_tls::ClientOptions,
    /// The proxy.
    pub proxy: ProxyMode,
}

/// Most same-origin redirects followed for one request.
const MAX_REDIRECTS: usize = 5;

impl HttpOptions {
    /// Builds a client with these options (also a check: cert files must load).
    pub(crate) fn client(&self, connect: Duration) -> Result<reqwest::Client, UpstreamError> {
        let tls = self
            .tls
            .build()
            .map_err(|e| UpstreamError::Tls(e.to_string()))?;
        let mut b = reqwest::Client::builder()
            .connect_timeout(connect)
            .pool_idle_timeout(Duration::from_secs(90))
            .tcp_nodelay(true)
            .tls_backend_preconfigured((*tls).clone())
            // A retried MCP request could run a tool twice: the gateway never retries on
            // its own.
            .retry(reqwest::retry::never())
            .redirect(reqwest::redirect::Policy::custom(|attempt| {
                let same_origin = attempt
                    .previous()
                    .first()
                    .is_some_and(|first| first.origin() == attempt.url().origin());
                let keeps_method = matches!(attempt.status().as_u16(), 307 | 308);
                if same_origin && keeps_method && attempt.previous().len() <= MAX_REDIRECTS {
                    attempt.follow()
                } else {
                    attempt.stop()
                }
            }));
        b = match &self.proxy {
            ProxyMode::Env => b,
            ProxyMode::Off => b.no_proxy(),
            ProxyMode::Url(u) => b.proxy(
                reqwest::Proxy::all(u)
                    .map_err(|e| UpstreamError::Connect(format!("proxy {u}: {}", chain(&e))))?,
            ),
        };
        b.build()
            .map_err(|e| UpstreamError::Connect(format!("HTTP client: {}", chain(&e))))
    }
}

/// The clients of one gateway, by options. Plain mutex: looked up when a session opens,
/// never held across an `.await`.
#[derive(Debug, Default, Clone)]
pub(crate) struct Clients {
    by_options: Arc<Mutex<HashMap<HttpOptions, reqwest::Client>>>,
}

impl Clients {
    pub(crate) fn get(
        &self,
        opts: &HttpOptions,
        connect: Duration,
    ) -> Result<reqwest::Client, UpstreamError> {
        if let Some(c) = self
            .by_options
            .lock()
            .ok()
            .and_then(|m| m.get(opts).cloned())
        {
            return Ok(c);
        }
        let c = opts.client(connect)?;
        if let Ok(mut m) = self.by_options.lock() {
            m.insert(opts.clone(), c.clone());
        }
        Ok(c)
    }
}

/// The error for a failure status: a redirect that was not followed names its target and
/// why; any other status is just the status.
pub(crate) fn status_error(resp: &reqwest::Response, configured: &reqwest::Url) -> UpstreamError {
    let status = resp.status().as_u16();
    if !(300..400).contains(&status) {
        return UpstreamError::Status(status);
    }
    let target = resp
        .headers()
        .get(reqwest::header::LOCATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|l| resp.url().join(l).ok());
    let Some(target) = target else {
        return UpstreamError::Redirect(format!("HTTP {status} without a usable Location"));
    };
    let why = if target.origin() != configured.origin() {
        "another origin: the configured credentials never leave the configured server"
    } else if !matches!(status, 307 | 308) {
        "this status would turn the POST into a GET"
    } else {
        "too many redirects"
    };
    UpstreamError::Redirect(format!(
        "HTTP {status} to {target} not followed ({why}); configure that URL if it is the right one"
    ))
}

/// Configured upstream headers as a header map; a bad name or value is a config error.
pub(crate) fn header_map(headers: &[(String, String)]) -> Result<HeaderMap, UpstreamError> {
    let mut map = HeaderMap::new();
    for (k, v) in headers {
        let name = HeaderName::from_bytes(k.as_bytes())
            .map_err(|e| UpstreamError::Connect(format!("bad header name {k}: {e}")))?;
        let value = HeaderValue::from_str(v)
            .map_err(|e| UpstreamError::Connect(format!("bad header value for {k}: {e}")))?;
        map.insert(name, value);
    }
    Ok(map)
}
