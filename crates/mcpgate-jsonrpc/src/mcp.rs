//! MCP transport constants: header names and protocol versions.

/// Session id header (HTTP header names are case-insensitive; this is the lower-case form).
pub const SESSION_ID_HEADER: &str = "mcp-session-id";
/// Protocol version header, sent by clients on every request after initialization.
pub const PROTOCOL_VERSION_HEADER: &str = "mcp-protocol-version";
/// The SSE resumption header.
pub const LAST_EVENT_ID_HEADER: &str = "last-event-id";

/// `Mcp-Method` (2026-07-28): the request's method, mirrored from the body.
pub const METHOD_HEADER: &str = "mcp-method";
/// `Mcp-Name` (2026-07-28): the tool, prompt or resource a request is about.
pub const NAME_HEADER: &str = "mcp-name";
/// Prefix of the `Mcp-Param-{Name}` headers (2026-07-28) mirroring tool arguments.
pub const PARAM_HEADER_PREFIX: &str = "mcp-param-";

/// The newest session-era protocol version (`initialize`, `Mcp-Session-Id`).
pub const LATEST_SESSION_VERSION: &str = "2025-11-25";
/// The sessionless revision: per-request `_meta`, `server/discover`, no `initialize`.
pub const MODERN_PROTOCOL_VERSION: &str = "2026-07-28";
/// What a server assumes when a client sends no `MCP-Protocol-Version` header.
pub const DEFAULT_PROTOCOL_VERSION: &str = "2025-03-26";

/// The session-era protocol versions mcpgate speaks, oldest first.
pub const SESSION_PROTOCOL_VERSIONS: &[&str] =
    &["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

/// Every protocol version mcpgate speaks, oldest first.
pub const SUPPORTED_PROTOCOL_VERSIONS: &[&str] = &[
    "2024-11-05",
    "2025-03-26",
    "2025-06-18",
    "2025-11-25",
    "2026-07-28",
];

/// Whether `v` is a protocol version mcpgate accepts.
pub fn is_supported_version(v: &str) -> bool {
    SUPPORTED_PROTOCOL_VERSIONS.contains(&v)
}

/// Whether `v` is a session-era version (served with `initialize` and sessions).
pub fn is_session_version(v: &str) -> bool {
    SESSION_PROTOCOL_VERSIONS.contains(&v)
}

/// Whether `v` names the sessionless era (2026-07-28 or later; ISO dates compare as text).
pub fn is_modern_version(v: &str) -> bool {
    v.len() == 10 && v >= MODERN_PROTOCOL_VERSION
}
