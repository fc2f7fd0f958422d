//! MCP transport constants: header names and protocol versions.

/// Session id header (HTTP header names are case-insensitive; this is the lower-case form).
pub const SESSION_ID_HEADER: &str = "mcp-session-id";
/// Protocol version header, sent by clients on every request after initialization.
pub const PROTOCOL_VERSION_HEADER: &str = "mcp-protocol-version";
/// The SSE resumption header.
pub const LAST_EVENT_ID_HEADER: &str = "last-event-id";

/// The newest protocol version mcpgate speaks.
pub const LATEST_PROTOCOL_VERSION: &str = "2025-11-25";
/// What a server assumes when a client sends no `MCP-Protocol-Version` header.
pub const DEFAULT_PROTOCOL_VERSION: &str = "2025-03-26";

/// Every protocol version mcpgate accepts, oldest first.
pub const SUPPORTED_PROTOCOL_VERSIONS: &[&str] =
    &["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

/// Whether `v` is a protocol version mcpgate accepts.
pub fn is_supported_version(v: &str) -> bool {
    SUPPORTED_PROTOCOL_VERSIONS.contains(&v)
}

/// The `initialize` method name.
pub const INITIALIZE: &str = "initialize";
/// The cancellation notification.
pub const CANCELLED: &str = "notifications/cancelled";
/// The progress notification.
pub const PROGRESS: &str = "notifications/progress";
