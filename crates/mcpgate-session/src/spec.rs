//! A configured upstream server, as the session layer needs it.

use std::time::Duration;

use mcpgate_compose::Backend;

use crate::eras::Protocol;

/// A configured upstream server.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerSpec {
    /// Its name (mount point `/servers/{name}/mcp`, log and metric label).
    pub name: String,
    /// What serves it: one server and how to reach it, or a virtual server's members.
    pub backend: Backend,
    /// Its sessions' idle timeout (`None`: the table's).
    pub idle_timeout: Option<Duration>,
    /// Whether its idle sessions may be ended to make room when the gateway is full
    /// (`max_sessions`, or `max_stdio_children` for stdio) instead of refusing a newcomer.
    pub evict_idle: bool,
    /// Which protocol era it speaks (or `Auto`: find out).
    pub protocol: Protocol,
    /// Whether 2026-07-28 clients reach it through the era bridge when it speaks only
    /// the session era (otherwise they get `-32022` and fall back to `initialize`).
    pub bridge: bool,
}

impl ServerSpec {
    /// A server with the default idle timeout; idle sessions are evicted when full for
    /// stdio servers (each holds a process), not for HTTP ones.
    pub fn new(name: impl Into<String>, backend: impl Into<Backend>) -> Self {
        let backend = backend.into();
        let evict_idle = backend.is_stdio();
        ServerSpec {
            name: name.into(),
            backend,
            idle_timeout: None,
            evict_idle,
            protocol: Protocol::Auto,
            bridge: true,
        }
    }
}
