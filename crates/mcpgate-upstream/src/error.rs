//! Upstream errors and teardown outcomes.

use std::fmt;
use std::sync::Arc;

/// Why an upstream operation failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum UpstreamError {
    /// Could not reach the server (connection refused, DNS, …).
    #[error("cannot connect to upstream: {0}")]
    Connect(#[source] Cause),
    /// A server's configuration is unusable (its URL, headers or proxy).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The connection broke (reset, early EOF) while talking to the server.
    #[error("upstream connection failed: {0}")]
    Io(#[source] Cause),
    /// TLS failed: the certificate is not trusted, names another host or expired; the
    /// server wants a client certificate.
    #[error(transparent)]
    Tls(#[from] mcpgate_tls::TlsFailure),
    /// A configured certificate file is unusable.
    #[error(transparent)]
    TlsConfig(Arc<mcpgate_tls::TlsError>),
    /// The server redirected somewhere the gateway does not follow.
    #[error("upstream redirect: {0}")]
    Redirect(#[from] Redirect),
    /// The server did not answer in time.
    #[error("upstream timed out after {0:?}")]
    Timeout(std::time::Duration),
    /// The server answered with an HTTP status that is not a success.
    #[error("upstream answered HTTP {0}")]
    Status(u16),
    /// The server no longer knows the session (HTTP 404 on a session request).
    #[error("upstream session is gone")]
    SessionGone,
    /// The server sent something that is not MCP, or a message could not be made.
    #[error("upstream protocol error: {0}")]
    Protocol(#[from] ProtocolError),
    /// The stdio child could not be started.
    #[error("cannot start upstream process: {0}")]
    Spawn(#[from] SpawnError),
    /// The stdio child exited (how, and its last stderr lines).
    #[error("upstream process {0}")]
    Exited(Exit),
    /// An HTTP upstream ended the session's stream or connection on its own.
    #[error("upstream ended the session: {0}")]
    Ended(Ending),
    /// The upstream session was closed by the gateway.
    #[error("upstream session closed")]
    Closed,
    /// A configured capacity is exhausted (e.g. the maximum number of stdio children).
    #[error("upstream capacity exhausted: {0}")]
    Capacity(&'static str),
    /// The session has no credential the server accepts (consent needed, the
    /// authorization server or token vault failed, or the server refused a fresh one).
    #[error(transparent)]
    Credential(#[from] CredentialError),
}

/// What a library below the gateway reported (an I/O, hyper or reqwest error), kept whole
/// and shared so that an [`UpstreamError`] can be cloned; shown as its whole chain in one
/// line ("error sending request: connection refused").
#[derive(Clone)]
pub struct Cause(Arc<dyn std::error::Error + Send + Sync + 'static>);

impl Cause {
    /// Keeps `e`.
    pub fn new(e: impl std::error::Error + Send + Sync + 'static) -> Self {
        Cause(Arc::new(e))
    }

    /// The error kept.
    pub fn get(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        &*self.0
    }
}

impl fmt::Debug for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let top = self.0.to_string();
        f.write_str(&top)?;
        let mut shown = top;
        let mut cur = self.0.source();
        while let Some(c) = cur {
            let t = c.to_string();
            if !shown.contains(&t) {
                write!(f, ": {t}")?;
                shown.push_str(&t);
            }
            cur = c.source();
        }
        Ok(())
    }
}

impl std::error::Error for Cause {}

/// A server's configuration the gateway cannot use.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ConfigError {
    /// The URL does not parse.
    #[error("bad upstream url {url}: {source}")]
    Url {
        /// The URL.
        url: String,
        /// Why it does not parse.
        source: Cause,
    },
    /// The URL is not an absolute `http://` or `https://` URL with a host.
    #[error("bad upstream url {url}: it must be an absolute http:// or https:// URL")]
    NotHttp {
        /// The URL.
        url: String,
    },
    /// A configured header name is not a header name.
    #[error("bad header name {name}: {source}")]
    HeaderName {
        /// The name.
        name: String,
        /// Why it is refused.
        source: Cause,
    },
    /// A configured header value is not a header value.
    #[error("bad header value for {name}: {source}")]
    HeaderValue {
        /// The header's name.
        name: String,
        /// Why it is refused.
        source: Cause,
    },
    /// The proxy URL is unusable.
    #[error("proxy {url}: {source}")]
    Proxy {
        /// The proxy's URL.
        url: String,
        /// Why it is refused.
        source: Cause,
    },
    /// The HTTP client could not be built.
    #[error("HTTP client: {0}")]
    Client(#[source] Cause),
    /// A URL the direct transport cannot use.
    #[error("bad upstream url {url}: {why}")]
    Unusable {
        /// The URL.
        url: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// A request that cannot be made into the proxied client's request.
    #[error("cannot build the request for the proxy: {0}")]
    Request(#[source] Cause),
}

/// A connection that could not be made.
#[derive(Debug, thiserror::Error)]
pub enum Dial {
    /// The TCP connection.
    #[error("{host}:{port}: {source}")]
    Tcp {
        /// The host.
        host: String,
        /// The port.
        port: u16,
        /// The OS's error.
        source: std::io::Error,
    },
    /// The TLS handshake, for a reason that is not a certificate's.
    #[error("TLS: {0}")]
    Tls(#[source] std::io::Error),
}

/// A redirect the gateway does not follow.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Redirect {
    /// A redirect without a `Location` the gateway can read.
    #[error("HTTP {status} without a usable Location")]
    NoLocation {
        /// The status.
        status: u16,
    },
    /// A redirect to `target` that the rules do not follow.
    #[error(
        "HTTP {status} to {target} not followed ({rule}); configure that URL if it is the right one"
    )]
    NotFollowed {
        /// The status.
        status: u16,
        /// Where it points.
        target: String,
        /// Which rule stops it.
        rule: RedirectRule,
    },
    /// Too many same-origin redirects in a row.
    #[error("more than {0} redirects")]
    TooMany(usize),
}

/// Why a redirect is not followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RedirectRule {
    /// It leads to another origin.
    OtherOrigin,
    /// It would turn the POST into a GET.
    ChangesMethod,
    /// It is one too many.
    TooMany,
}

impl fmt::Display for RedirectRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RedirectRule::OtherOrigin => {
                "another origin: the configured credentials never leave the configured server"
            }
            RedirectRule::ChangesMethod => "this status would turn the POST into a GET",
            RedirectRule::TooMany => "too many redirects",
        })
    }
}

/// What the upstream sent that is not what MCP promises, or a message the gateway could
/// not make.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ProtocolError {
    /// A message that is not JSON-RPC.
    #[error("{0}")]
    Message(#[source] Arc<mcpgate_jsonrpc::ParseError>),
    /// JSON that does not have the shape its method promises.
    #[error("{0}")]
    Json(#[source] Arc<serde_json::Error>),
    /// A request was expected.
    #[error("not a request")]
    NotARequest,
    /// The answer ended before its response.
    #[error("upstream ended the stream without a response")]
    NoResponse,
    /// A resumed stream that is not an event stream.
    #[error("resumed stream is not text/event-stream")]
    NotEventStream,
    /// A message a layer above the transports (the era bridge, a virtual server) could not
    /// translate.
    #[error("{0}")]
    Translate(#[source] Cause),
    /// One request's own exchange with a server that keeps no session failed: the request
    /// fails, not the client's session.
    #[error("this request's exchange failed: {0}")]
    Exchange(#[source] Box<UpstreamError>),
    /// A server-to-client exchange the bridge gave up on.
    #[error("more than {0} input_required rounds")]
    TooManyRounds(usize),
    /// An operation the transport does not have.
    #[error("{0} needs a Streamable HTTP upstream")]
    NeedsHttp(&'static str),
}

impl From<mcpgate_tls::TlsError> for UpstreamError {
    fn from(e: mcpgate_tls::TlsError) -> Self {
        UpstreamError::TlsConfig(Arc::new(e))
    }
}

impl From<mcpgate_jsonrpc::ParseError> for UpstreamError {
    fn from(e: mcpgate_jsonrpc::ParseError) -> Self {
        UpstreamError::Protocol(ProtocolError::Message(Arc::new(e)))
    }
}

impl From<serde_json::Error> for UpstreamError {
    fn from(e: serde_json::Error) -> Self {
        UpstreamError::Protocol(ProtocolError::Json(Arc::new(e)))
    }
}

/// Why a stdio child could not be started.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SpawnError {
    /// The command is empty.
    #[error("empty command")]
    EmptyCommand,
    /// The OS refused to start it.
    #[error("{program}: {source}")]
    Os {
        /// The program.
        program: String,
        /// The OS's error.
        source: Arc<std::io::Error>,
    },
    /// The child has no pipes.
    #[error("child pipes missing")]
    NoPipes,
    /// Its children keep dying at start; this one is not started before the backoff ends.
    #[error("{0}")]
    Backoff(mcpgate_child::Refused),
    /// Its sandbox or limits cannot be set up.
    #[error(transparent)]
    Contain(#[from] mcpgate_child::ChildError),
}

/// How a stdio child ended: "exited with status 1", "was killed by signal 9 (SIGKILL)",
/// and the last lines it wrote on stderr.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exit {
    /// How it ended (or what it did, when it still runs: "closed its stdin").
    pub how: String,
    /// Its last non-empty stderr lines, oldest first.
    pub stderr: Vec<String>,
    /// The bound the gateway ended it for ("memory", "processes", "cpu"), if one was.
    pub limit: Option<&'static str>,
}

impl fmt::Display for Exit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.how)?;
        if !self.stderr.is_empty() {
            write!(f, "; stderr: {}", self.stderr.join(" | "))?;
        }
        Ok(())
    }
}

/// How an upstream ended a session on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// A legacy SSE server closed its stream.
    StreamClosed,
    /// The upstream session ended before it answered `initialize`.
    BeforeInitialize,
}

impl fmt::Display for Ending {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Ending::StreamClosed => "it closed the SSE stream",
            Ending::BeforeInitialize => "it ended before answering initialize",
        })
    }
}

impl UpstreamError {
    /// A label for metrics (`mcpgate_upstream_errors_total{kind}`).
    pub fn kind(&self) -> &'static str {
        match self {
            UpstreamError::Connect(_) | UpstreamError::Config(_) => "connect",
            UpstreamError::Tls(_) | UpstreamError::TlsConfig(_) => "tls",
            UpstreamError::Redirect(_) => "redirect",
            UpstreamError::Ended(_) => "ended",
            UpstreamError::Io(_) => "reset",
            UpstreamError::Timeout(_) => "timeout",
            UpstreamError::Status(_) => "status",
            UpstreamError::SessionGone => "session_gone",
            UpstreamError::Protocol(_) => "protocol",
            UpstreamError::Spawn(SpawnError::Backoff(_)) => "backoff",
            UpstreamError::Spawn(_) => "spawn",
            UpstreamError::Exited(Exit { limit: Some(_), .. }) => "limit",
            UpstreamError::Exited(_) => "exited",
            UpstreamError::Closed => "closed",
            UpstreamError::Capacity(_) => "capacity",
            UpstreamError::Credential(_) => "credential",
        }
    }

    /// Whether the upstream session cannot be used any more, so the client session must
    /// end (the client then re-initialises). A connection that breaks under a request
    /// ([`UpstreamError::Io`]) is: the upstream died or reset it while working — the
    /// harmless case, a pooled connection the server closed while it sat idle, never gets
    /// here (the transport sends such a request again on a fresh connection).
    pub fn is_fatal(&self) -> bool {
        matches!(
            self,
            UpstreamError::Connect(_)
                | UpstreamError::Config(_)
                | UpstreamError::Tls(_)
                | UpstreamError::TlsConfig(_)
                | UpstreamError::Ended(_)
                | UpstreamError::Io(_)
                | UpstreamError::SessionGone
                | UpstreamError::Spawn(_)
                | UpstreamError::Exited(_)
                | UpstreamError::Closed
        )
    }

    /// A message the gateway could not translate (`e` says why).
    pub fn translate(e: impl std::error::Error + Send + Sync + 'static) -> Self {
        UpstreamError::Protocol(ProtocolError::Translate(Cause::new(e)))
    }

    pub(crate) fn from_reqwest(e: reqwest::Error, timeout: std::time::Duration) -> Self {
        if let Some(tls) = mcpgate_tls::describe(&e) {
            UpstreamError::Tls(tls)
        } else if e.is_timeout() {
            UpstreamError::Timeout(timeout)
        } else if e.is_connect() {
            UpstreamError::Connect(Cause::new(e))
        } else {
            UpstreamError::Io(Cause::new(e))
        }
    }
}

/// What happened when the gateway ended an upstream session. Every variant is an
/// acceptable end; none is reported to the client as a failure.
#[derive(Debug, Clone)]
pub enum Teardown {
    /// HTTP: the server acknowledged the DELETE.
    Deleted,
    /// HTTP: the server did not know the session any more (404) or does not support
    /// DELETE (405), or no session was ever established.
    NothingToDelete(Option<u16>),
    /// HTTP: the DELETE failed on the wire (ECONNRESET, EOF, refused) or with another
    /// status. Logged and counted.
    DeleteFailed(Box<UpstreamError>),
    /// HTTP: the DELETE was not answered in time.
    DeleteTimedOut,
    /// stdio: the child exited after its stdin was closed.
    Exited(Option<i32>),
    /// stdio: the child had to be sent SIGTERM.
    Terminated,
    /// stdio: the child had to be sent SIGKILL.
    Killed,
    /// The upstream had already ended before the gateway closed it.
    AlreadyEnded,
    /// Legacy SSE: the stream was closed (that transport has no DELETE).
    Disconnected,
    /// HTTP, sealed session: this replica let go of it; the upstream session lives on
    /// (the client may go on through another replica).
    Kept,
}

impl PartialEq for Teardown {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Teardown::NothingToDelete(a), Teardown::NothingToDelete(b)) => a == b,
            (Teardown::Exited(a), Teardown::Exited(b)) => a == b,
            (Teardown::DeleteFailed(_), Teardown::DeleteFailed(_)) => true,
            (a, b) => std::mem::discriminant(a) == std::mem::discriminant(b),
        }
    }
}

impl Teardown {
    /// Whether this end is worth a warning (the upstream misbehaved during teardown).
    pub fn is_abnormal(&self) -> bool {
        matches!(
            self,
            Teardown::DeleteFailed(_) | Teardown::DeleteTimedOut | Teardown::Killed
        )
    }

    /// A label for logs and metrics.
    pub fn label(&self) -> &'static str {
        match self {
            Teardown::Deleted => "deleted",
            Teardown::NothingToDelete(_) => "nothing_to_delete",
            Teardown::DeleteFailed(_) => "delete_failed",
            Teardown::DeleteTimedOut => "delete_timeout",
            Teardown::Exited(_) => "exited",
            Teardown::Terminated => "terminated",
            Teardown::Killed => "killed",
            Teardown::AlreadyEnded => "already_ended",
            Teardown::Disconnected => "disconnected",
            Teardown::Kept => "kept",
        }
    }
}

impl fmt::Display for Teardown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Teardown::NothingToDelete(Some(s)) => write!(f, "nothing to delete (HTTP {s})"),
            Teardown::DeleteFailed(e) => write!(f, "delete failed: {e}"),
            Teardown::Exited(Some(c)) => write!(f, "exited with code {c}"),
            other => f.write_str(other.label()),
        }
    }
}

/// Why a session has no credential for its server.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CredentialError {
    /// The user has not consented (or must consent again): the request can be retried
    /// once they have, at the consent's URL.
    #[error("the user must authorize the gateway toward this server first")]
    Consent(Consent),
    /// The server needs a user's credential and the client is anonymous.
    #[error("this server needs a per-user credential and the client is not authenticated")]
    Anonymous,
    /// The credential could not be obtained (the authorization server is down or refused,
    /// the token vault is unavailable, …).
    #[error("no upstream credential: {0}")]
    Unavailable(#[source] Cause),
}

/// A consent the user must give out of band (an OAuth authorization), as a URL-mode
/// elicitation: where to send the user, under which id, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Consent {
    /// Where the user goes (the gateway's own page, which sends them on).
    pub url: String,
    /// The elicitation's id (`notifications/elicitation/complete` names it).
    pub elicitation_id: String,
    /// What the user is asked, for the client to show.
    pub message: String,
}
