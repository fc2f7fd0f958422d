//! # mcpgate-tls
//!
//! TLS for every hop mcpgate makes or takes, and nothing else: no HTTP, no MCP.
//!
//! - [`ClientOptions`]: rustls toward servers (upstream MCP servers, JWKS endpoints) with
//!   verification always on — the platform trust store, extra CAs (`ca_file`), a client
//!   certificate for mutual TLS — or, named as such, `dangerously_accept_invalid_certs`.
//! - [`ServerTls`]: a listener's certificate (and optional client CA), reloaded when the
//!   files change or on demand, and the handshake of each new connection (a plain HTTP
//!   request on the TLS port is answered `400`).
//! - [`check_certs`], [`load_pair`]: the checks `--check-config` runs (readable, parses,
//!   within validity, key matches certificate), each failure naming file and dates.
//! - [`describe`]: what a TLS failure on a connection means, in words a user can act on
//!   (unknown issuer, hostname mismatch, expired, client certificate required).
//!
//! One crypto provider for the whole process: aws-lc-rs (rustls' default).
//!
//! ## Layout
//! - `client.rs`: client configurations and the platform trust store.
//! - `server.rs`: listener configurations, reloading, the handshake.
//! - `inspect.rs`: certificate and key checks.
//! - `pem.rs`: reading PEM files.
//! - `error.rs`: [`TlsError`] and [`describe`].

mod client;
mod error;
mod inspect;
mod pem;
mod provider;
mod server;

pub use client::{ClientOptions, platform_roots};
pub use error::{FileProblem, TlsError, TlsFailure, describe};
pub use inspect::{CertInfo, check_certs, load_pair};
pub use server::{AcceptError, ServerOptions, ServerTls};
pub use tokio_rustls::server::TlsStream;
