//! [`SessionUpstream`], what a client session's upstream is: one server's
//! ([`ServerUpstream`]: a transport's session, or the era bridge's session in front of a
//! 2026-07-28-only server) or a virtual server's members.

use mcpgate_jsonrpc::Message;
use mcpgate_upstream::{HttpUpstream, Replies, Teardown, UpstreamError};

use crate::members::{MemberState, Members};
use crate::server::ServerUpstream;

/// A client session's upstream.
#[derive(Debug)]
pub enum SessionUpstream {
    /// One server's session.
    Server(ServerUpstream),
    /// A virtual server: one upstream session per member.
    Virtual(Box<Members>),
}

impl SessionUpstream {
    /// Sends a request; the returned stream yields related messages and ends with the
    /// response (carrying the request's original id).
    pub async fn request(&self, msg: Message) -> Result<Replies, UpstreamError> {
        match self {
            SessionUpstream::Server(u) => u.request(msg).await,
            SessionUpstream::Virtual(u) => u.request(msg).await,
        }
    }

    /// Sends a notification or a response.
    pub async fn send(&self, msg: Message) -> Result<(), UpstreamError> {
        match self {
            SessionUpstream::Server(u) => u.send(msg).await,
            SessionUpstream::Virtual(u) => u.send(msg).await,
        }
    }

    /// Opens the standalone server→client channel, once; later calls do nothing.
    pub fn listen(&self) {
        match self {
            SessionUpstream::Server(u) => u.listen(),
            SessionUpstream::Virtual(u) => u.listen(),
        }
    }

    /// Waits (bounded) while the standalone channel is being opened, so that a request
    /// sent now cannot make the upstream send something before it can be received.
    pub async fn settled(&self) {
        match self {
            SessionUpstream::Server(u) => u.settled().await,
            SessionUpstream::Virtual(u) => u.settled().await,
        }
    }

    /// Ends the upstream session. Never fails: what happened is reported.
    pub async fn close(&self) -> Teardown {
        match self {
            SessionUpstream::Server(u) => u.close().await,
            SessionUpstream::Virtual(u) => u.close().await,
        }
    }

    /// The sealed Streamable HTTP session this is, if it is one (see
    /// [`Upstream::sealed`]).
    pub fn sealed(&self) -> Option<&HttpUpstream> {
        match self {
            SessionUpstream::Server(ServerUpstream::Direct(u)) => u.sealed(),
            _ => None,
        }
    }

    /// What a Streamable HTTP upstream said about its session (for sealing it).
    pub fn http_session(&self) -> Option<mcpgate_upstream::Resumed> {
        match self {
            SessionUpstream::Server(ServerUpstream::Direct(u)) => u.http_session(),
            _ => None,
        }
    }

    /// A short name of the transport, for logs and the admin API.
    pub fn kind(&self) -> &'static str {
        match self {
            SessionUpstream::Server(u) => u.kind(),
            SessionUpstream::Virtual(_) => "virtual",
        }
    }

    /// The child's process id, for a stdio upstream.
    pub fn pid(&self) -> Option<u32> {
        match self {
            SessionUpstream::Server(u) => u.pid(),
            SessionUpstream::Virtual(_) => None,
        }
    }

    /// A stdio child's last stderr lines (empty for other upstreams).
    pub fn stderr_tail(&self) -> Vec<String> {
        match self {
            SessionUpstream::Server(u) => u.stderr_tail(),
            SessionUpstream::Virtual(_) => Vec::new(),
        }
    }

    /// A virtual server's members and how each stands (`None` for other upstreams).
    pub fn members(&self) -> Option<Vec<MemberState>> {
        match self {
            SessionUpstream::Virtual(u) => Some(u.states()),
            SessionUpstream::Server(_) => None,
        }
    }
}
