//! [`ServerUpstream`], one server's upstream session: a transport's session, or the era
//! bridge's session in front of a 2026-07-28-only server.

use mcpgate_jsonrpc::Message;
use mcpgate_upstream::{Replies, Teardown, Upstream, UpstreamError};

use crate::reverse::Reverse;

/// One server's upstream session.
#[derive(Debug)]
pub enum ServerUpstream {
    /// The server's own session, over its transport.
    Direct(Upstream),
    /// A session the gateway holds for a session-era client of a 2026-07-28-only server.
    Reverse(Box<Reverse>),
}

impl ServerUpstream {
    /// Sends a request; the returned stream yields related messages and ends with the
    /// response (carrying the request's original id).
    pub async fn request(&self, msg: Message) -> Result<Replies, UpstreamError> {
        match self {
            ServerUpstream::Direct(u) => u.request(msg).await,
            ServerUpstream::Reverse(u) => u.request(msg).await,
        }
    }

    /// Sends a notification or a response.
    pub async fn send(&self, msg: Message) -> Result<(), UpstreamError> {
        match self {
            ServerUpstream::Direct(u) => u.send(msg).await,
            ServerUpstream::Reverse(u) => u.send(msg).await,
        }
    }

    /// Opens the standalone server→client channel, once.
    pub fn listen(&self) {
        match self {
            ServerUpstream::Direct(u) => u.listen(),
            ServerUpstream::Reverse(u) => u.listen(),
        }
    }

    /// Waits (bounded) while the standalone channel is being opened.
    pub async fn settled(&self) {
        if let ServerUpstream::Direct(u) = self {
            u.settled().await;
        }
    }

    /// Ends the upstream session. Never fails: what happened is reported.
    pub async fn close(&self) -> Teardown {
        match self {
            ServerUpstream::Direct(u) => u.close().await,
            ServerUpstream::Reverse(u) => u.close().await,
        }
    }

    /// A short name of the transport, for logs and the admin API.
    pub fn kind(&self) -> &'static str {
        match self {
            ServerUpstream::Direct(u) => u.kind(),
            ServerUpstream::Reverse(_) => "bridged-2026",
        }
    }

    /// The child's process id, for a stdio upstream.
    pub fn pid(&self) -> Option<u32> {
        match self {
            ServerUpstream::Direct(u) => u.pid(),
            ServerUpstream::Reverse(_) => None,
        }
    }

    /// A stdio child's last stderr lines (empty for other upstreams).
    pub fn stderr_tail(&self) -> Vec<String> {
        match self {
            ServerUpstream::Direct(u) => u.stderr_tail(),
            ServerUpstream::Reverse(_) => Vec::new(),
        }
    }
}
