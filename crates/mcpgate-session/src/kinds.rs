//! What kind of session it is (how the client reached the gateway) and why it ended.

/// Why a session ended. Every reason goes through the same [`Session::close`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseReason {
    /// The client sent DELETE.
    ClientDelete,
    /// No activity for the idle timeout.
    Idle,
    /// The upstream ended the session (process exited, session gone upstream).
    UpstreamClosed,
    /// An upstream failure made the session unusable.
    UpstreamError,
    /// The upstream refused `initialize`.
    InitFailed,
    /// An operator ended it.
    Admin,
    /// The gateway is shutting down.
    Shutdown,
    /// The client's connection went away (the legacy SSE transport: its stream is the
    /// session).
    ClientGone,
    /// Ended while idle to make room for a new session when the gateway was full.
    Evicted,
    /// Its server was removed from the configuration, or changed, by a reload.
    ConfigReload,
}

impl CloseReason {
    /// Whether the upstream ended the session (rather than the client or the gateway).
    pub fn is_upstream(self) -> bool {
        matches!(
            self,
            CloseReason::UpstreamClosed | CloseReason::UpstreamError | CloseReason::InitFailed
        )
    }

    /// Whether a sealed session closed for this reason keeps its upstream session: it
    /// ends only on this replica (its client may be using it through another).
    pub fn keeps_sealed(self) -> bool {
        // An upstream failure seen here (a reset, a refused connection) may be this
        // replica's alone: the session other replicas serve is not deleted for it.
        matches!(
            self,
            CloseReason::Idle
                | CloseReason::Evicted
                | CloseReason::Shutdown
                | CloseReason::UpstreamError
        )
    }

    /// The metrics and log label.
    pub fn as_str(self) -> &'static str {
        match self {
            CloseReason::ClientDelete => "client_delete",
            CloseReason::Idle => "idle",
            CloseReason::UpstreamClosed => "upstream_closed",
            CloseReason::UpstreamError => "upstream_error",
            CloseReason::InitFailed => "init_failed",
            CloseReason::Admin => "admin",
            CloseReason::Shutdown => "shutdown",
            CloseReason::ClientGone => "client_gone",
            CloseReason::Evicted => "evicted",
            CloseReason::ConfigReload => "config_reload",
        }
    }
}

/// How the client reached the gateway.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrontKind {
    /// Streamable HTTP (`/mcp`).
    StreamableHttp,
    /// The legacy HTTP+SSE transport (`/sse` + `/message`).
    LegacySse,
    /// No client session: the era bridge holds it for a 2026-07-28 client's requests to
    /// a session-era server (see `bridge_pool.rs`).
    Bridge,
    /// The MCP Inspector v2 UI's relay (`/api/mcp/*` of `mcpgate inspector`): one
    /// event stream carries what the server sends, each message is posted on its own.
    Inspector,
}

impl FrontKind {
    /// A label for logs, metrics and the admin API.
    pub fn as_str(self) -> &'static str {
        match self {
            FrontKind::StreamableHttp => "streamable-http",
            FrontKind::LegacySse => "sse",
            FrontKind::Bridge => "bridged",
            FrontKind::Inspector => "inspector",
        }
    }
}
