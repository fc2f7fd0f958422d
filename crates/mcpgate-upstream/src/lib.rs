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
//! - `connector.rs`: [`Connector`] (HTTP pools, timeouts, stdio children, the tracker of
//!   every upstream task) and [`Target`].
//! - `client.rs`: the cache of endpoints, connection pools and reqwest clients per
//!   [`HttpOptions`] (TLS, proxy); the redirect rule of the proxied path.
//! - `endpoint.rs`: one configured HTTP endpoint, resolved once (URI, prebuilt headers).
//! - `transport.rs`: how an endpoint is reached: a lock-free pool of HTTP/1.1 connections
//!   per origin (same-origin redirects, the resend rules), or reqwest through a proxy.
//! - `wire.rs`: one connection, driven by the request using it (no connection task).
//! - `http.rs`: Streamable HTTP upstream sessions; `http_stream.rs`: their SSE streams;
//!   `http_state.rs`: what the upstream told about its session (id, version), and
//!   [`Resume`] / [`Resumed`], how a sealed session's upstream starts from it.
//! - `legacy_sse.rs`: the 2024-11-05 HTTP+SSE upstream (one GET stream, POSTs to its endpoint).
//! - `stdio.rs`: one child process per session; process-group teardown.
//! - `modern.rs`: MCP 2026-07-28 toward HTTP upstreams: one exchange per request
//!   ([`Connector::forward`]), and the era probe ([`Connector::probe`]).
//! - `modern_wire.rs`: one 2026-07-28 exchange on an endpoint (pass-through and bridge).
//! - `bridged.rs`: the era bridge's upstream for a session-era client of a
//!   2026-07-28-only server (the session held here; `initialize` from `server/discover`,
//!   `input_required` as requests to the client, the GET stream as one listen stream).
//! - `members.rs`: a virtual server's upstream ([`MembersUpstream`]): one upstream session
//!   per member, fan-out and merge, routing by name and URI (the rules from
//!   `mcpgate-virtual`); `members_sink.rs`: the members' sinks and which are up.
//! - `mux.rs`: request-id rewriting and reply routing over one pipe (stdio, legacy SSE).
//! - `replies.rs`: [`Replies`], the per-request stream.
//! - `error.rs`: [`UpstreamError`] and [`Teardown`].

mod bridged;
mod client;
mod connector;
mod endpoint;
mod error;
mod http;
mod http_state;
mod http_stream;
mod legacy_sse;
mod lines;
mod members;
mod members_sink;
mod modern;
mod modern_wire;
mod mux;
mod replies;
mod sink;
mod stdio;
mod timeouts;
mod transport;
mod upstream;
mod wire;

pub use client::{HttpOptions, ProxyMode};
pub use connector::{Connector, MemberTarget, Target, VirtualTarget};
pub use error::{Teardown, UpstreamError};
pub use http_state::{Resume, Resumed};
pub use lines::{Line, LineCodec};
pub use members::MembersUpstream;
pub use members_sink::{FORBIDDEN, MemberEvents, MemberState};
pub use modern::{ModernRequest, ModernResponse, Verdict, classify, discover_request};
pub use replies::Replies;
pub use sink::EventSink;
pub use timeouts::Timeouts;
pub use upstream::Upstream;
