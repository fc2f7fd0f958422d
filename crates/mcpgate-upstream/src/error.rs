//! Upstream errors and teardown outcomes.

use std::fmt;

/// Why an upstream operation failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum UpstreamError {
    /// Could not reach the server (connection refused, DNS, …).
    #[error("cannot connect to upstream: {0}")]
    Connect(String),
    /// The connection broke (reset, early EOF) while talking to the server.
    #[error("upstream connection failed: {0}")]
    Io(String),
    /// TLS failed: the certificate is not trusted, names another host or expired; the
    /// server wants a client certificate; or a configured certificate file is unusable.
    #[error("{0}")]
    Tls(String),
    /// The server redirected somewhere the gateway does not follow.
    #[error("upstream redirect: {0}")]
    Redirect(String),
    /// The server did not answer in time.
    #[error("upstream timed out after {0:?}")]
    Timeout(std::time::Duration),
    /// The server answered with an HTTP status that is not a success.
    #[error("upstream answered HTTP {0}")]
    Status(u16),
    /// The server no longer knows the session (HTTP 404 on a session request).
    #[error("upstream session is gone")]
    SessionGone,
    /// The server sent something that is not MCP.
    #[error("upstream protocol error: {0}")]
    Protocol(String),
    /// The stdio child could not be started.
    #[error("cannot start upstream process: {0}")]
    Spawn(String),
    /// The stdio child exited (the text says how: status, signal, its last stderr lines).
    #[error("upstream process {0}")]
    Exited(String),
    /// An HTTP upstream ended the session's stream or connection on its own.
    #[error("upstream ended the session: {0}")]
    Ended(String),
    /// The upstream session was closed by the gateway.
    #[error("upstream session closed")]
    Closed,
    /// A configured capacity is exhausted (e.g. the maximum number of stdio children).
    #[error("upstream capacity exhausted: {0}")]
    Capacity(&'static str),
}

impl UpstreamError {
    /// A label for metrics (`mcpgate_upstream_errors_total{kind}`).
    pub fn kind(&self) -> &'static str {
        match self {
            UpstreamError::Connect(_) => "connect",
            UpstreamError::Tls(_) => "tls",
            UpstreamError::Redirect(_) => "redirect",
            UpstreamError::Ended(_) => "ended",
            UpstreamError::Io(_) => "reset",
            UpstreamError::Timeout(_) => "timeout",
            UpstreamError::Status(_) => "status",
            UpstreamError::SessionGone => "session_gone",
            UpstreamError::Protocol(_) => "protocol",
            UpstreamError::Spawn(_) => "spawn",
            UpstreamError::Exited(_) => "exited",
            UpstreamError::Closed => "closed",
            UpstreamError::Capacity(_) => "capacity",
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
                | UpstreamError::Tls(_)
                | UpstreamError::Ended(_)
                | UpstreamError::Io(_)
                | UpstreamError::SessionGone
                | UpstreamError::Spawn(_)
                | UpstreamError::Exited(_)
                | UpstreamError::Closed
        )
    }

    pub(crate) fn from_reqwest(e: &reqwest::Error, timeout: std::time::Duration) -> Self {
        if let Some(tls) = mcpgate_tls::describe(e) {
            UpstreamError::Tls(tls)
        } else if e.is_timeout() {
            UpstreamError::Timeout(timeout)
        } else if e.is_connect() {
            UpstreamError::Connect(chain(e))
        } else {
            UpstreamError::Io(chain(e))
        }
    }
}

/// The full error chain in one line ("error sending request: connection reset by peer").
pub(crate) fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let t = c.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        cur = c.source();
    }
    s
}

/// What happened when the gateway ended an upstream session. Every variant is an
/// acceptable end; none is reported to the client as a failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Teardown {
    /// HTTP: the server acknowledged the DELETE.
    Deleted,
    /// HTTP: the server did not know the session any more (404) or does not support
    /// DELETE (405), or no session was ever established.
    NothingToDelete(Option<u16>),
    /// HTTP: the DELETE failed on the wire (ECONNRESET, EOF, refused) or with another
    /// status. Logged and counted.
    DeleteFailed(String),
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
