//! `mcpgate-testkit`: a real, fast MCP server that mcpgate's integration
//! tests, benchmark and built-in `demo-server` run against.
//!
//! This crate owns the test upstream: the MCP behaviour (tools `echo`, `add`,
//! `notify`, `slow`, `sample`, `whoami`, `die`, `hang`; one resource; one
//! prompt; cancellation; the session timer) shared by two transports —
//! Streamable HTTP ([`HttpServer`], usable in-process on a real socket) and
//! stdio ([`run_stdio`]) — plus fault injection (`die`, `reset_on_delete`,
//! `no_get`, `always_sse`) and the counters ([`Stats`]) tests assert on.

mod http;
mod rpc;
mod stats;
mod stdio;
mod tools;

pub use http::{HttpOptions, HttpServer};
pub use stats::Stats;
pub use stdio::{StdioOptions, run_demo_stdio, run_stdio};
