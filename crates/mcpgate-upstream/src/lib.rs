//! # mcpgate-upstream
//!
//! How bytes reach one MCP server: the transports. One *dedicated* upstream session per
//! client session over Streamable HTTP, legacy HTTP+SSE or stdio (a child process per
//! session), and one 2026-07-28 exchange per request. It knows nothing of the front, the
//! session table, other sessions, the era bridge or virtual servers (those are composed
//! above it, in `mcpgate-compose`), and routes no MCP method.
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
//!   every upstream task) and [`Start`]; `target.rs`: [`Target`].
//! - `warm.rs`: warm starts, stdio children started ahead of their sessions.
//! - `client.rs`: the cache of endpoints, connection pools and reqwest clients per
//!   [`HttpOptions`] (TLS, proxy); the redirect rule of the proxied path.
//! - `endpoint.rs`: one configured HTTP endpoint, resolved once (URI, prebuilt headers).
//! - `transport.rs`: how an endpoint is reached: a lock-free pool of HTTP/1.1 connections
//!   per origin (same-origin redirects, the resend rules), or reqwest through a proxy.
//! - `wire.rs`: one connection, driven by the request using it (no connection task).
//! - `whole.rs`: [`whole`], an HTTP body read whole (a one-frame body as it is, not
//!   copied; the front reads its POST bodies with it too).
//! - `http.rs`: Streamable HTTP upstream sessions; `http_stream.rs`: their SSE streams;
//!   `http_state.rs`: what the upstream told about its session (id, version), and
//!   [`Resume`] / [`Resumed`], how a sealed session's upstream starts from it.
//! - `legacy_sse.rs`: the 2024-11-05 HTTP+SSE upstream (one GET stream, POSTs to its endpoint).
//! - `stdio.rs`: one child process per session; process-group teardown.
//! - `children.rs`: what stdio children share (count, reaper, start backoff, the
//!   memory/process sampler, private `/tmp`s; the containment itself is `mcpgate-child`'s).
//! - `modern.rs`: MCP 2026-07-28 toward HTTP upstreams: one exchange per request
//!   ([`Connector::forward`]), and the era probe ([`Connector::probe`]).
//! - `modern_wire.rs`: one 2026-07-28 exchange on an endpoint ([`exchange`]).
//! - `mux.rs`: request-id rewriting and reply routing over one pipe (stdio, legacy SSE).
//! - `replies.rs`: [`Replies`], the per-request stream.
//! - `sink.rs`: [`EventSink`] and [`Opening`].
//! - `credential.rs`: [`Credential`], a session's `Authorization` when it is not a static
//!   header (per principal, renewed once on a `401`), and [`Auth`], a server's source of them.
//! - `error.rs`: [`UpstreamError`] and its kinds, [`Teardown`].

mod children;
mod client;
mod connector;
mod credential;
mod endpoint;
mod error;
mod http;
mod http_state;
mod http_stream;
mod legacy_sse;
mod lines;
mod modern;
mod modern_wire;
mod mux;
mod replies;
mod sink;
mod stdio;
mod target;
mod timeouts;
mod transport;
mod upstream;
mod warm;
mod whole;
mod wire;

pub use client::{HttpOptions, ProxyMode};
pub use connector::{Connector, Start};
pub use credential::{Auth, Consent, Credential, CredentialError, CredentialFuture, Credentials};
pub use endpoint::Endpoint;
pub use error::{
    Cause, ConfigError, Dial, Ending, Exit, ProtocolError, Redirect, RedirectRule, SpawnError,
    Teardown, UpstreamError,
};
pub use http::HttpUpstream;
pub use http_state::{Resume, Resumed};
pub use lines::{Line, LineCodec};
pub use modern::{ModernRequest, ModernResponse, Verdict, classify, discover_request};
pub use modern_wire::exchange;
pub use replies::Replies;
pub use sink::{EventSink, Opening};
pub use target::Target;
pub use timeouts::Timeouts;
pub use upstream::Upstream;
pub use whole::whole;
