//! `mcpgate-testkit`: a real, fast MCP server that mcpgate's integration
//! tests, benchmark and built-in `demo-server` run against.
//!
//! This crate owns the test upstream: the MCP behaviour (tools `echo`, `add`,
//! `notify`, `slow`, `sample`, `sample_async`, `roots`, `touch`, `whoami`,
//! `die`, `hang`; one resource, with subscriptions; one prompt; cancellation;
//! the session timer) shared by two transports — Streamable HTTP
//! ([`HttpServer`], usable in-process on a real socket, with SSE event ids and
//! `Last-Event-ID` resumption) and stdio ([`run_stdio`]) — plus fault
//! injection (`die`, `reset_on_delete`, `no_get`, `always_sse`, `cut_after`)
//! and the counters ([`Stats`]) tests assert on.
//!
//! Server-to-client traffic not tied to a request — `sample_async`'s
//! `sampling/createMessage`, `notifications/resources/updated` from `touch`,
//! the timer — goes to the session's standalone channel: the GET stream over
//! HTTP (stream `0`), stdout over stdio.

mod http;
mod rpc;
mod stats;
mod stdio;
mod tools;

pub use http::{HttpOptions, HttpServer};
pub use stats::Stats;
pub use stdio::{StdioOptions, run_demo_stdio, run_stdio};
