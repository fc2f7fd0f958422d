//! [`Upstream`]: one dedicated upstream session, whatever its transport.

use mcpgate_jsonrpc::Message;

use crate::error::{Teardown, UpstreamError};
use crate::replies::Replies;
use crate::{http, legacy_sse, stdio};

/// One dedicated upstream session.
#[derive(Debug)]
pub enum Upstream {
    /// A Streamable HTTP server.
    Http(Box<http::HttpUpstream>),
    /// A child process speaking newline-delimited JSON on stdio.
    Stdio(stdio::StdioUpstream),
    /// A legacy HTTP+SSE server.
    LegacySse(Box<legacy_sse::LegacyUpstream>),
}

impl Upstream {
    /// Sends a request; the returned stream yields related messages and ends with the
    /// response (carrying the request's original id).
    pub async fn request(&self, msg: Message) -> Result<Replies, UpstreamError> {
        match self {
            Upstream::Http(u) => u.request(msg).await,
            Upstream::Stdio(u) => u.request(msg).await,
            Upstream::LegacySse(u) => u.request(msg).await,
        }
    }

    /// Sends a notification or a response.
    pub async fn send(&self, msg: Message) -> Result<(), UpstreamError> {
        match self {
            Upstream::Http(u) => u.send(msg).await,
            Upstream::Stdio(u) => u.send(msg).await,
            Upstream::LegacySse(u) => u.send(msg).await,
        }
    }

    /// Opens the standalone server→client channel, once; later calls do nothing (a pipe
    /// has only the one channel, always open).
    pub fn listen(&self) {
        if let Upstream::Http(u) = self {
            u.listen();
        }
    }

    /// Waits (bounded) while the standalone channel is being opened, so that a request
    /// sent now cannot make the upstream send something before it can be received.
    pub async fn settled(&self) {
        if let Upstream::Http(u) = self {
            u.settled().await;
        }
    }

    /// Ends the upstream session. Never fails: what happened is reported.
    pub async fn close(&self) -> Teardown {
        match self {
            Upstream::Http(u) => u.close().await,
            Upstream::Stdio(u) => u.close().await,
            Upstream::LegacySse(u) => u.close().await,
        }
    }

    /// The sealed Streamable HTTP session this is (one any replica may serve), if it is
    /// one: what only such a session does (let go without ending, follow its client's
    /// stream, report its state for the seal) is asked of it.
    pub fn sealed(&self) -> Option<&http::HttpUpstream> {
        match self {
            Upstream::Http(u) if u.is_sealed() => Some(u),
            _ => None,
        }
    }

    /// What a Streamable HTTP upstream said about its session (for sealing it).
    pub fn http_session(&self) -> Option<crate::http_state::Resumed> {
        match self {
            Upstream::Http(u) => u.session(),
            _ => None,
        }
    }

    /// A short name of the transport, for logs and the admin API.
    pub fn kind(&self) -> &'static str {
        match self {
            Upstream::Http(_) => "streamable-http",
            Upstream::Stdio(_) => "stdio",
            Upstream::LegacySse(_) => "sse",
        }
    }

    /// The child's process id, for a stdio upstream.
    pub fn pid(&self) -> Option<u32> {
        match self {
            Upstream::Stdio(u) => u.pid(),
            _ => None,
        }
    }

    /// A stdio child's last stderr lines, oldest first (empty for other upstreams).
    pub fn stderr_tail(&self) -> Vec<String> {
        match self {
            Upstream::Stdio(u) => u.stderr_tail(),
            _ => Vec::new(),
        }
    }
}
