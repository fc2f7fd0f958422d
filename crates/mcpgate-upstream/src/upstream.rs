//! [`Upstream`]: one dedicated upstream session, whatever its transport.

use futures::future::BoxFuture;
use mcpgate_jsonrpc::Message;

use crate::error::{Teardown, UpstreamError};
use crate::replies::Replies;
use crate::{bridged, http, legacy_sse, members, members_sink, stdio};

impl members_sink::Link for Upstream {
    fn request(&self, msg: Message) -> BoxFuture<'_, Result<Replies, UpstreamError>> {
        Box::pin(Upstream::request(self, msg))
    }
    fn send(&self, msg: Message) -> BoxFuture<'_, Result<(), UpstreamError>> {
        Box::pin(Upstream::send(self, msg))
    }
    fn listen(&self) {
        Upstream::listen(self);
    }
    fn settled(&self) -> BoxFuture<'_, ()> {
        Box::pin(Upstream::settled(self))
    }
    fn close(&self) -> BoxFuture<'_, Teardown> {
        Box::pin(Upstream::close(self))
    }
    fn kind(&self) -> &'static str {
        Upstream::kind(self)
    }
    fn pid(&self) -> Option<u32> {
        Upstream::pid(self)
    }
}

/// One dedicated upstream session.
#[derive(Debug)]
pub enum Upstream {
    /// A Streamable HTTP server.
    Http(Box<http::HttpUpstream>),
    /// A child process speaking newline-delimited JSON on stdio.
    Stdio(stdio::StdioUpstream),
    /// A legacy HTTP+SSE server.
    LegacySse(Box<legacy_sse::LegacyUpstream>),
    /// A server that speaks only MCP 2026-07-28, for a session-era client: the session
    /// is held here (the era bridge).
    Bridged(Box<bridged::BridgedUpstream>),
    /// A virtual server: one upstream session per member.
    Members(Box<members::MembersUpstream>),
}

impl Upstream {
    /// Sends a request; the returned stream yields related messages and ends with the
    /// response (carrying the request's original id).
    pub async fn request(&self, msg: Message) -> Result<Replies, UpstreamError> {
        match self {
            Upstream::Http(u) => u.request(msg).await,
            Upstream::Stdio(u) => u.request(msg).await,
            Upstream::LegacySse(u) => u.request(msg).await,
            Upstream::Bridged(u) => u.request(msg).await,
            Upstream::Members(u) => u.request(msg).await,
        }
    }

    /// Sends a notification or a response.
    pub async fn send(&self, msg: Message) -> Result<(), UpstreamError> {
        match self {
            Upstream::Http(u) => u.send(msg).await,
            Upstream::Stdio(u) => u.send(msg).await,
            Upstream::LegacySse(u) => u.send(msg).await,
            Upstream::Bridged(u) => u.send(msg).await,
            Upstream::Members(u) => u.send(msg).await,
        }
    }

    /// Opens the standalone server→client channel, once; later calls do nothing.
    pub fn listen(&self) {
        match self {
            Upstream::Http(u) => u.listen(),
            Upstream::Bridged(u) => u.listen(),
            Upstream::Members(u) => u.listen(),
            Upstream::Stdio(_) | Upstream::LegacySse(_) => {}
        }
    }

    /// Waits (bounded) while the standalone channel is being opened, so that a request
    /// sent now cannot make the upstream send something before it can be received.
    pub async fn settled(&self) {
        match self {
            Upstream::Http(u) => u.settled().await,
            Upstream::Members(u) => u.settled().await,
            _ => {}
        }
    }

    /// Ends the upstream session. Never fails: what happened is reported.
    pub async fn close(&self) -> Teardown {
        match self {
            Upstream::Http(u) => u.close().await,
            Upstream::Stdio(u) => u.close().await,
            Upstream::LegacySse(u) => u.close().await,
            Upstream::Bridged(u) => u.close().await,
            Upstream::Members(u) => u.close().await,
        }
    }

    /// Lets go of the session without ending it upstream when it is a sealed HTTP session
    /// (`None` otherwise: then only [`Upstream::close`] ends it).
    pub fn release(&self) -> Option<Teardown> {
        match self {
            Upstream::Http(u) if u.is_sealed() => Some(u.release()),
            _ => None,
        }
    }

    /// Stops the standalone channel of a sealed session (its client's stream left this
    /// replica); nothing for other sessions, whose channel lives as long as they do.
    pub fn unlisten(&self) {
        if let Upstream::Http(u) = self
            && u.is_sealed()
        {
            u.unlisten();
        }
    }

    /// Opens the standalone channel resuming after the upstream's event `last` (a sealed
    /// session's client resuming, maybe on another replica than before).
    pub fn listen_after(&self, last: String) {
        if let Upstream::Http(u) = self {
            u.listen_from(Some(last));
        }
    }

    /// What a Streamable HTTP upstream said about its session (for sealing it).
    pub fn http_session(&self) -> Option<crate::http_state::Resumed> {
        match self {
            Upstream::Http(u) => u.session(),
            _ => None,
        }
    }

    /// Whether this is a sealed session's upstream.
    pub fn is_sealed(&self) -> bool {
        matches!(self, Upstream::Http(u) if u.is_sealed())
    }

    /// A short name of the transport, for logs and the admin API.
    pub fn kind(&self) -> &'static str {
        match self {
            Upstream::Http(_) => "streamable-http",
            Upstream::Stdio(_) => "stdio",
            Upstream::LegacySse(_) => "sse",
            Upstream::Bridged(_) => "bridged-2026",
            Upstream::Members(_) => "virtual",
        }
    }

    /// The child's process id, for a stdio upstream.
    pub fn pid(&self) -> Option<u32> {
        match self {
            Upstream::Http(_)
            | Upstream::LegacySse(_)
            | Upstream::Bridged(_)
            | Upstream::Members(_) => None,
            Upstream::Stdio(u) => u.pid(),
        }
    }

    /// A virtual server's members and how each stands (`None` for other upstreams).
    pub fn members(&self) -> Option<Vec<members_sink::MemberState>> {
        match self {
            Upstream::Members(u) => Some(u.states()),
            _ => None,
        }
    }
}
