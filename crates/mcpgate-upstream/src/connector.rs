//! Opening dedicated upstream sessions.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::AtomicI64;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use crate::client::Clients;
use crate::{EventSink, HttpOptions, Upstream, UpstreamError, http, legacy_sse, stdio};

/// Where a server lives. Comes from configuration, never from a request.
#[derive(Debug, Clone)]
pub enum Target {
    /// A Streamable HTTP endpoint.
    Http {
        /// The MCP endpoint URL.
        url: String,
        /// Extra headers sent on every upstream request (e.g. upstream credentials).
        headers: Vec<(String, String)>,
        /// TLS and proxy.
        http: HttpOptions,
    },
    /// A legacy HTTP+SSE server (protocol 2024-11-05): its SSE endpoint URL.
    LegacySse {
        /// The SSE endpoint URL (e.g. `http://host/sse`).
        url: String,
        /// Extra headers sent on every upstream request.
        headers: Vec<(String, String)>,
        /// TLS and proxy.
        http: HttpOptions,
    },
    /// A program speaking MCP on stdio; one process is started per client session.
    Stdio {
        /// Program and arguments.
        command: Vec<String>,
        /// Extra environment variables.
        env: BTreeMap<String, String>,
        /// Working directory.
        cwd: Option<String>,
        /// Start from an empty environment (only `env`) instead of the gateway's.
        env_clear: bool,
    },
}

/// Upper bounds on each upstream step.
#[derive(Debug, Clone)]
pub struct Timeouts {
    /// TCP connect.
    pub connect: Duration,
    /// Time until the upstream answers a request (headers for HTTP; the response for stdio
    /// is bounded by the session layer).
    pub request: Duration,
    /// The HTTP DELETE at teardown.
    pub delete: Duration,
    /// stdio: how long after closing stdin the child may take to exit before SIGTERM, and
    /// after SIGTERM before SIGKILL.
    pub exit_grace: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            connect: Duration::from_secs(5),
            request: Duration::from_secs(300),
            delete: Duration::from_secs(5),
            exit_grace: Duration::from_secs(2),
        }
    }
}

/// Opens upstream sessions. One per gateway: it owns the HTTP connection pools (one per
/// distinct [`HttpOptions`]; the only thing sessions share upstream) and counts live stdio
/// children.
#[derive(Debug, Clone)]
pub struct Connector {
    pub(crate) clients: Clients,
    pub(crate) timeouts: Timeouts,
    pub(crate) max_line: usize,
    children: Arc<AtomicI64>,
    max_children: i64,
}

impl Connector {
    /// A connector with the given timeouts; `max_line` bounds one stdio line.
    pub fn new(timeouts: Timeouts, max_line: usize) -> Result<Self, UpstreamError> {
        Ok(Connector {
            clients: Clients::default(),
            timeouts,
            max_line,
            children: Arc::new(AtomicI64::new(0)),
            max_children: i64::MAX,
        })
    }

    /// Caps the number of live stdio children; opening one more fails with
    /// [`UpstreamError::Capacity`].
    pub fn with_max_stdio_children(mut self, max: usize) -> Self {
        self.max_children = i64::try_from(max).unwrap_or(i64::MAX);
        self
    }

    /// Live stdio children started by this connector.
    pub fn stdio_children(&self) -> i64 {
        self.children.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Builds (once) what `target` needs before any session of it opens, so a bad
    /// certificate file or proxy is reported at start instead of at the first session.
    pub fn prepare(&self, target: &Target) -> Result<(), UpstreamError> {
        match target {
            Target::Http { http, .. } | Target::LegacySse { http, .. } => {
                self.clients.get(http, self.timeouts.connect).map(drop)
            }
            Target::Stdio { .. } => Ok(()),
        }
    }

    /// Opens a dedicated upstream session for one client session. `label` names the
    /// client session in logs; `cancel` is the session's token (its child tokens stop
    /// every task this upstream starts); `sink` receives what belongs to no request.
    pub fn open(
        &self,
        target: &Target,
        label: &str,
        cancel: CancellationToken,
        sink: Arc<dyn EventSink>,
    ) -> Result<Upstream, UpstreamError> {
        match target {
            Target::Http { url, headers, http } => {
                Ok(Upstream::Http(Box::new(http::HttpUpstream::new(
                    self.clone(),
                    self.clients.get(http, self.timeouts.connect)?,
                    url.clone(),
                    headers,
                    label,
                    cancel,
                    sink,
                )?)))
            }
            Target::LegacySse { url, headers, http } => Ok(Upstream::LegacySse(Box::new(
                legacy_sse::LegacyUpstream::open(
                    self.clone(),
                    self.clients.get(http, self.timeouts.connect)?,
                    url,
                    header_map(headers)?,
                    label,
                    cancel,
                    sink,
                )?,
            ))),
            Target::Stdio { .. } if self.stdio_children() >= self.max_children => {
                Err(UpstreamError::Capacity("too many stdio children"))
            }
            Target::Stdio {
                command,
                env,
                cwd,
                env_clear,
            } => stdio::StdioUpstream::spawn(
                self,
                command,
                env,
                *env_clear,
                cwd.as_deref(),
                label,
                cancel,
                sink,
                self.children.clone(),
            )
            .map(Upstream::Stdio),
        }
    }
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
