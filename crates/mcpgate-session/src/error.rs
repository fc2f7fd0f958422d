//! Session errors.

use mcpgate_upstream::UpstreamError;

/// Why a session operation failed. The front maps each to an HTTP status and a JSON-RPC
/// error in one place.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SessionError {
    /// No session with that id (never existed, ended, or owned by someone else).
    #[error("session not found")]
    NotFound,
    /// The session ended while the operation was under way.
    #[error("session closed")]
    Closed,
    /// The table is full.
    #[error("too many sessions")]
    TooManySessions,
    /// The principal has too many sessions.
    #[error("too many sessions for this principal")]
    TooManySessionsForPrincipal,
    /// The session has too many requests in flight.
    #[error("too many requests in flight for this session")]
    TooManyInflight,
    /// A standalone stream is already open for the session.
    #[error("a GET stream is already open for this session")]
    StreamConflict,
    /// The gateway is shutting down.
    #[error("shutting down")]
    ShuttingDown,
    /// The request took longer than the configured timeout.
    #[error("request timed out after {0:?}")]
    Timeout(std::time::Duration),
    /// The upstream does not speak the era the request needs (a session-era server asked
    /// a 2026-07-28 request).
    #[error("the upstream does not speak this protocol era")]
    WrongEra,
    /// The upstream answered `initialize` with something other than a result.
    #[error("the upstream refused initialize: {}", String::from_utf8_lossy(.0.raw()))]
    Refused(mcpgate_jsonrpc::Message),
    /// The upstream failed.
    #[error(transparent)]
    Upstream(#[from] UpstreamError),
}
