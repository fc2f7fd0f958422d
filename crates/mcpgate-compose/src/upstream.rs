//! [`SessionUpstream`], what a client session's upstream is: one server's
//! ([`ServerUpstream`]: a transport's session, or the era bridge's session in front of a
//! 2026-07-28-only server) or a virtual server's members.

use mcpgate_jsonrpc::Message;
use mcpgate_upstream::{HttpUpstream, Replies, Teardown, Upstream, UpstreamError};

use crate::members::{MemberState, Members};
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
}

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

    /// A virtual server's members and how each stands (`None` for other upstreams).
    pub fn members(&self) -> Option<Vec<MemberState>> {
        match self {
            SessionUpstream::Virtual(u) => Some(u.states()),
            SessionUpstream::Server(_) => None,
        }
    }
}
