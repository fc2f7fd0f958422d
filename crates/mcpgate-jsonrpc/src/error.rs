//! JSON-RPC error codes and error bodies.
//!
//! Standard codes come from JSON-RPC 2.0; the `-320xx` ones are mcpgate's own
//! (server-defined range) and are documented in `docs/ARCHITECTURE.md`.

/// Invalid JSON was received.
pub const PARSE_ERROR: i64 = -32700;
/// The JSON sent is not a valid JSON-RPC message.
pub const INVALID_REQUEST: i64 = -32600;
/// The method does not exist.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// Invalid method parameters.
pub const INVALID_PARAMS: i64 = -32602;
/// Internal error.
pub const INTERNAL_ERROR: i64 = -32603;
/// MCP: the resource asked for does not exist (session era; the same number as the
/// gateway's [`OVERLOADED`], in another context).
pub const RESOURCE_NOT_FOUND: i64 = -32002;
/// A transport-level refusal of the request (bad headers, missing session id, …).
pub const BAD_REQUEST: i64 = -32000;
/// The session id is unknown or the session has ended; the client must re-initialise.
pub const SESSION_NOT_FOUND: i64 = -32001;
/// The gateway is at capacity (sessions, in-flight requests).
pub const OVERLOADED: i64 = -32002;
/// The upstream failed (connection refused or reset, process died, bad answer).
pub const UPSTREAM_ERROR: i64 = -32003;
/// The session ended while the request was in flight.
pub const SESSION_CLOSED: i64 = -32004;
/// The upstream did not answer in time.
pub const UPSTREAM_TIMEOUT: i64 = -32005;
/// The gateway has no credential the upstream accepts for this client (its
/// authorization server is down or refused, the token vault is unavailable, the
/// client is anonymous).
pub const UPSTREAM_CREDENTIAL: i64 = -32006;
/// 2025-11-25: the request needs a URL-mode elicitation first; `data.elicitations`
/// lists where to send the user.
pub const URL_ELICITATION_REQUIRED: i64 = -32042;
/// 2026-07-28: a mirrored header disagrees with the body, or is missing (HTTP 400).
pub const HEADER_MISMATCH: i64 = -32020;
/// 2026-07-28: the request needs a client capability it did not declare (HTTP 400).
pub const MISSING_CAPABILITY: i64 = -32021;
/// 2026-07-28: the protocol version is not supported; `data.supported` lists those that
/// are (HTTP 400).
pub const UNSUPPORTED_VERSION: i64 = -32022;

/// Why bytes could not be read as a JSON-RPC message.
#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    /// Not JSON at all.
    #[error("parse error: {0}")]
    Json(#[from] serde_json::Error),
    /// JSON, but not a JSON-RPC 2.0 message.
    #[error("invalid JSON-RPC message: {0}")]
    Invalid(&'static str),
}

impl ParseError {
    /// The JSON-RPC code that reports this error to a client.
    pub fn code(&self) -> i64 {
        match self {
            ParseError::Json(_) => PARSE_ERROR,
            ParseError::Invalid(_) => INVALID_REQUEST,
        }
    }
}
