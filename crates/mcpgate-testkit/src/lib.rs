//! `mcpgate-testkit`: a real, fast MCP server that mcpgate's integration
//! tests, benchmark and built-in `demo-server` run against.
//!
//! This crate owns the test upstream: the MCP behaviour (tools `echo`, `add`,
//! `notify`, `slow`, `sample`, `sample_async`, `roots`, `touch`, `whoami`,
//! `die`, `hang`, `stats`; one resource, with subscriptions; one prompt;
//! cancellation; the session timer) shared by two transports — Streamable HTTP
//! ([`HttpServer`], usable in-process on a real socket, with SSE event ids and
//! `Last-Event-ID` resumption) and stdio ([`run_stdio`]) — plus fault
//! injection and the counters ([`Stats`]) tests assert on (over stdio the
//! `stats` tool returns them).
//!
//! Faults: the tools `die` (stdio: exit 3; HTTP: abort the connection), `hang`
//! (never answers), `flood {count, size, background}` (standalone notifications
//! as fast as they are read: the GET stream over HTTP, stdout over stdio),
//! `garbage {kind}` (a related message that is not JSON, JSON but not JSON-RPC,
//! `huge` (10 MiB by default), or — stdio — a line that is not UTF-8; then the
//! answer) and `close_early` (HTTP: an SSE answer without event ids that ends
//! cleanly before the response); and the [`HttpOptions`] `reset_on_delete`,
//! `no_get`, `always_sse`, `cut_after`, and HTTPS (`tls`, [`tls_config`]; mutual TLS
//! with a client CA). A POST at protocol 2026-07-28 is answered statelessly
//! (`server/discover`, `tools/list`, `tools/call echo`): the benchmark's fast modern
//! upstream.
//!
//! Server-to-client traffic not tied to a request — `sample_async`'s
//! `sampling/createMessage`, `notifications/resources/updated` from `touch`,
//! the timer — goes to the session's standalone channel: the GET stream over
//! HTTP (stream `0`), stdout over stdio.

mod http;
mod rpc;
mod stats;
mod stdio;
mod tls;
mod tools;

pub use http::{HttpOptions, HttpServer};
pub use stats::Stats;
pub use stdio::{StdioOptions, run_demo_stdio, run_stdio};
pub use tls::tls_config;
