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

use http::Uri;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use crate::endpoint::Endpoint;
use crate::error::{Cause, ConfigError, UpstreamError};
use crate::timeouts::Timeouts;
use crate::transport::{Origin, Transport};

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
    /// Whether requests to `uri` go through a proxy.
    pub(crate) fn proxy_for(&self, uri: &Uri) -> bool {
        match &self.proxy {
            ProxyMode::Off => false,
            ProxyMode::Url(_) => true,
            ProxyMode::Env => hyper_util::client::proxy::matcher::Matcher::from_env()
                .intercept(uri)
                .is_some(),
        }
    }

    /// Builds a client with these options (also a check: cert files must load).
    pub(crate) fn client(&self, connect: Duration) -> Result<reqwest::Client, UpstreamError> {
        let tls = self.tls.build()?;
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
            ProxyMode::Url(u) => {
                b.proxy(reqwest::Proxy::all(u).map_err(|e| ConfigError::Proxy {
                    url: u.clone(),
                    source: Cause::new(e),
                })?)
            }
        };
        b.build()
            .map_err(|e| ConfigError::Client(Cause::new(e)).into())
    }
}

/// The HTTP clients of one gateway. Plain mutex: taken when a session opens (and by
/// cold paths), never held across an `.await`, never on the request path — a session
/// keeps its [`Endpoint`].
#[derive(Debug, Default, Clone)]
pub(crate) struct Clients {
    cache: Arc<Mutex<Cache>>,
}

#[derive(Debug, Default)]
struct Cache {
    /// reqwest clients (proxied upstreams, legacy SSE), by options.
    reqwest: HashMap<HttpOptions, reqwest::Client>,
    /// Direct connection pools, by options and origin.
    origins: HashMap<(HttpOptions, String), Arc<Origin>>,
    /// Resolved endpoints, by options, URL and configured headers.
    endpoints: HashMap<EndpointKey, Arc<Endpoint>>,
}

type EndpointKey = (HttpOptions, String, Vec<(String, String)>);

impl Clients {
    /// The reqwest client for `opts` (built once; building checks the certificate files).
    pub(crate) fn get(
        &self,
        opts: &HttpOptions,
        connect: Duration,
    ) -> Result<reqwest::Client, UpstreamError> {
        if let Some(c) = self.lock().and_then(|m| m.reqwest.get(opts).cloned()) {
            return Ok(c);
        }
        let c = opts.client(connect)?;
        if let Some(mut m) = self.lock() {
            m.reqwest.insert(opts.clone(), c.clone());
        }
        Ok(c)
    }

    fn lock(&self) -> Option<std::sync::MutexGuard<'_, Cache>> {
        self.cache.lock().ok()
    }

    /// The endpoint at `url` with `headers`, reached as `opts` say: directly on a pooled
    /// hyper connection, or through reqwest when a proxy applies.
    pub(crate) fn endpoint(
        &self,
        url: &str,
        headers: &[(String, String)],
        opts: &HttpOptions,
        timeouts: &Timeouts,
    ) -> Result<Arc<Endpoint>, UpstreamError> {
        let key = (opts.clone(), url.to_owned(), headers.to_vec());
        if let Some(e) = self.lock().and_then(|m| m.endpoints.get(&key).cloned()) {
            return Ok(e);
        }
        let uri: Uri = url.parse().map_err(|e| ConfigError::Url {
            url: url.to_owned(),
            source: Cause::new(e),
        })?;
        if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.host().is_none() {
            return Err(ConfigError::NotHttp {
                url: url.to_owned(),
            }
            .into());
        }
        let transport = if opts.proxy_for(&uri) {
            Transport::Proxied(self.get(opts, timeouts.connect)?)
        } else {
            Transport::Direct(self.origin(opts, &uri, timeouts)?)
        };
        let e = Endpoint::new(transport, uri, header_map(headers)?);
        if let Some(mut m) = self.lock() {
            // Configured servers are few; URLs given at run time (the inspector's remote
            // servers) must not grow the cache without bound.
            if m.endpoints.len() >= MAX_CACHED {
                m.endpoints.clear();
                m.origins.clear();
            }
            m.endpoints.insert(key, e.clone());
        }
        Ok(e)
    }

    fn origin(
        &self,
        opts: &HttpOptions,
        uri: &Uri,
        timeouts: &Timeouts,
    ) -> Result<Arc<Origin>, UpstreamError> {
        let name = format!(
            "{}://{}",
            uri.scheme_str().unwrap_or("http"),
            uri.authority().map_or("", |a| a.as_str())
        );
        let key = (opts.clone(), name);
        if let Some(o) = self.lock().and_then(|m| m.origins.get(&key).cloned()) {
            return Ok(o);
        }
        let tls = if uri.scheme_str() == Some("https") {
            Some(opts.tls.build()?)
        } else {
            None
        };
        let o = Origin::new(uri, tls, timeouts.connect, IDLE_KEEP)?;
        if let Some(mut m) = self.lock() {
            m.origins.insert(key, o.clone());
        }
        Ok(o)
    }
}

/// How long an idle upstream connection is kept. Servers close theirs sooner (Node: 5 s);
/// a request that meets a connection closed under it is sent again on a fresh one.
const IDLE_KEEP: Duration = Duration::from_secs(60);
/// Most endpoints (and origins) cached; past it the cache starts again (sessions keep
/// theirs).
const MAX_CACHED: usize = 1024;

/// Configured upstream headers as a header map; a bad name or value is a config error.
pub(crate) fn header_map(headers: &[(String, String)]) -> Result<HeaderMap, UpstreamError> {
    let mut map = HeaderMap::new();
    for (k, v) in headers {
        let name = HeaderName::from_bytes(k.as_bytes()).map_err(|e| ConfigError::HeaderName {
            name: k.clone(),
            source: Cause::new(e),
        })?;
        let value = HeaderValue::from_str(v).map_err(|e| ConfigError::HeaderValue {
            name: k.clone(),
            source: Cause::new(e),
        })?;
        map.insert(name, value);
    }
    Ok(map)
}
