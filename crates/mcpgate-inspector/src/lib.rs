//! # mcpgate-inspector
//!
//! mcpgate as the backend of the MCP Inspector web UI. It owns what makes that safe and
//! what the UI's protocols need: the allowlist of targets a caller may open (`policy.rs`),
//! the browser guards (`guard.rs`: Host, Origin, the constant-time token check) and the
//! UI's endpoints (`v1.rs`: the Inspector 1.x proxy protocol). It serves through the
//! front's [`Fallback`] hook: every session a UI opens is an ordinary mcpgate session with
//! its own upstream session, on the front's table and teardown path. It never spawns a
//! process or opens an upstream connection itself; the session layer does, for a
//! `ServerSpec` this crate built from an allowed target.
//!
//! It also owns its configuration: `mcpgate inspector`'s command line ([`Args`]) and
//! config file become a [`Setup`] here, so the binary only parses and serves.
//!
//! ## Layout
//! - `setup.rs`: [`Args`] and the config file (`setup/raw.rs`: keys, defaults, checks;
//!   `setup/allowlist.rs`: what the command line allows) → [`Setup`].
//! - `config.rs`: [`InspectorConfig`], what configures it.
//! - `error.rs`: its errors ([`InspectorError`] and the kinds under it).
//! - `inspector.rs`: [`Inspector`], its runtime form.
//! - `serve.rs`: the front's hook ([`mcpgate_server::Fallback`]) dispatching to the protocol.
//! - `policy.rs`: the allowlist: stdio commands, URL prefixes, the scrubbed environment.
//! - `args.rs`: the 1.x UI's command-line formats (`args` string, `env` JSON, headers).
//! - `guard.rs`: Host, Origin and token checks; refusals.
//! - `v1.rs`: the Inspector 1.x proxy protocol (`/mcp`, `/stdio`, `/sse`, `/message`,
//!   `/config`, `/health`).
//! - `v2.rs`: the Inspector 2.x backend: the UI's files (`v2/ui.rs`), its MCP relay
//!   (`v2/relay.rs`), its side routes (`v2/side.rs`: storage, log, the fetch relay).
//! - `ssrf.rs`: the guard of the fetch relay.
//! - `token.rs`: [`random_token`], the tokens this process makes up.

mod args;
mod config;
mod error;
mod guard;
mod inspector;
mod policy;
mod serve;
mod setup;
mod ssrf;
mod token;
mod v1;
mod v2;

pub use config::{InspectorConfig, InspectorDefaults, Protocol, ProxyAuth, TOKEN_HEADER};
pub use error::{
    AllowlistError, FetchAllowError, InspectorError, RandomError, SetupError, StdioProblem,
    UiError, UrlProblem,
};
pub use inspector::Inspector;
pub use policy::{StdioRule, UrlRule};
pub use setup::{Args, Setup};
pub use ssrf::FetchAllow;
pub use token::random_token;
pub use v2::API_TOKEN_HEADER;
