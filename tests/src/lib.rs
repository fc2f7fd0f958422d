//! # mcpgate-tests
//!
//! Support for the integration tests in `tests/gateway/`: they run the real `mcpgate`
//! binary (and, for stdio upstreams, the real `mcpgate-testkit` binary) as child processes
//! on loopback sockets, and talk to it over real HTTP.
//!
//! - [`Gateway`]: a running `mcpgate` process; SIGTERM on drop.
//! - [`Client`]: a minimal Streamable HTTP MCP client over reqwest that exposes what tests
//!   assert on (status codes, headers, every SSE event).
//! - [`Pki`]: a test CA and certificates (valid, expired, wrong name, client) as PEM files.
//! - [`ConnectProxy`]: an HTTP `CONNECT` proxy that records its tunnels.
//! - [`admin`]: the admin API of a running gateway.
//! - [`bridge`]: a raw MCP 2026-07-28 client (per-request `_meta`, mirrored headers).
//! - [`browser`]: a Node + headless Chromium script, its line protocol and screenshots.
//! - [`children`]: stdio children found by a mark in their environment; misbehaving ones.
//! - [`clients`]: the `tests/clients` fixtures: the everything server, the TS and Python
//!   SDK clients, and running a script that prints one JSON line.
//! - [`faults`]: raw connections that stall, `/proc` readings, the fault tests' checks.
//! - [`inspector`]: `mcpgate inspector` and the Inspector UI's requests to it.
//! - [`inspector2`]: `mcpgate inspector` in 2.x mode: the UI's API requests and relay.
//! - [`jwt`]: a JWKS endpoint and tokens signed with the fixture key.
//! - [`layout`]: the workspace's file sizes and module dependency cycles (`tests/layout.rs`).
//! - [`rules`]: the production code's rules: function lengths, string errors, what the
//!   transport crate depends on, `bridged` names (`tests/layout.rs`).
//! - [`legacy`]: a legacy HTTP+SSE client (`GET /sse`, POSTs to the announced endpoint).
//! - [`modern`]: the MCP 2026-07-28 SDK fixtures (`tests/modern`).
//! - [`raw`]: raw HTTP/1.1 bytes to the front, and an upstream that answers with given bytes.
//! - [`oauth`]: the upstream-OAuth fixtures (`tests/oauth`): an OpenID provider, a
//!   protected MCP server, a browserless consent.
//! - [`postgres`]: a real PostgreSQL cluster on a temporary directory (Debian's).
//! - [`nginx`]: a real nginx running a shipped config (`deploy/…`) in front of replicas.
//! - [`virtuals`]: virtual servers' members, the SDK clients' virtual-server scripts.
//! - [`bin`]: where the workspace's binaries are (build them first:
//!   `cargo build --workspace --bins`).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test support: a panic is a failed test

pub mod admin;
pub mod bridge;
pub mod browser;
pub mod children;
mod client;
pub mod clients;
pub mod faults;
mod gateway;
pub mod inspector;
pub mod inspector2;
pub mod jwt;
pub mod layout;
pub mod legacy;
pub mod modern;
pub mod nginx;
pub mod oauth;
pub mod otlp;
mod pki;
pub mod postgres;
mod proxy;
pub mod raw;
pub mod rules;
pub mod sealed;
pub mod virtuals;

pub use client::{Client, Reply, Session, Stream, parse_sse, sse_events};
pub use gateway::{Gateway, Launch, bin, check_config, children_of, wait_until};
pub use pki::{CertFiles, Pki};
pub use proxy::ConnectProxy;
