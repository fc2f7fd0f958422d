//! # mcpgate-upstream
//!
//! One *dedicated* upstream MCP session per client session. This crate knows how to open,
//! talk to and close such a session over each upstream transport; it knows nothing of the
//! front, the session table or other sessions.
//!
//! An [`Upstream`] offers four operations:
//! - [`Upstream::request`]: send a JSON-RPC request; get [`Replies`], the stream of messages
//!   the upstream relates to that request (progress, server requests, …) ending with its
//!   response, already carrying the client's original id.
//! - [`Upstream::send`]: send a notification or a response (to a server request).
//! - [`Upstream::listen`]: open the standalone server→client channel (HTTP GET stream);
//!   what arrives there, and every server message that belongs to no request, goes to the
//!   [`EventSink`] given at [`Connector::open`], as does the upstream's end.
//! - [`Upstream::close`]: end the upstream session, every step bounded by a timeout, and
//!   report what happened ([`Teardown`]) instead of failing.
//!
//! ## Layout
//! - `connector.rs`: [`Connector`] (HTTP pools, timeouts, stdio children) and [`Target`].
//! - `client.rs`: HTTP clients per [`HttpOptions`] (TLS, proxy), the redirect rule.
//! - `http.rs`: Streamable HTTP upstream (reqwest).
//! - `legacy_sse.rs`: the 2024-11-05 HTTP+SSE upstream (one GET stream, POSTs to its endpoint).
//! - `stdio.rs`: one child process per session; process-group teardown.
//! - `modern.rs`: MCP 2026-07-28 toward HTTP upstreams: one exchange per request
//!   ([`Connector::forward`]), and the era probe ([`Connector::probe`]).
//! - `mux.rs`: request-id rewriting and reply routing over one pipe (stdio, legacy SSE).
//! - `replies.rs`: [`Replies`], the per-request stream.
//! - `error.rs`: [`UpstreamError`] and [`Teardown`].

mod client;
mod connector;
mod error;
mod http;
mod legacy_sse;
mod lines;
mod modern;
mod mux;
mod replies;
mod stdio;

pub use client::{HttpOptions, ProxyMode};
pub use connector::{Connector, Target, Timeouts};
pub use error::{Teardown, UpstreamError};
pub use lines::{Line, LineCodec};
pub use modern::{ModernRequest, ModernResponse, Verdict, classify, discover_request};
pub use replies::Replies;

use mcpgate_jsonrpc::Message;

/// Receives what an upstream session does that belongs to no particular request. It is
/// called synchronously by the task that read the message, so that a message the
/// upstream sent before a response is routed before that response is delivered (a
/// channel hop here would let the response overtake it). Implementations must not block.
pub trait EventSink: Send + Sync + std::fmt::Debug + 'static {
    /// A server message unrelated to any in-flight request (standalone stream, or a stdio
    /// message that matched no request).
    fn message(&self, msg: Message);
    /// The upstream session ended on its own (process exited, session expired upstream).
    fn closed(&self, why: UpstreamError);
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

    /// Opens the standalone server→client channel, once; later calls do nothing.
    pub fn listen(&self) {
        match self {
            Upstream::Http(u) => u.listen(),
            Upstream::Stdio(_) | Upstream::LegacySse(_) => {}
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
            Upstream::Http(_) | Upstream::LegacySse(_) => None,
            Upstream::Stdio(u) => u.pid(),
        }
    }
}
