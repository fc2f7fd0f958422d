//! # mcpgate-oauth
//!
//! The gateway as an OAuth client toward the MCP servers behind it: where a server's
//! authorization server is (RFC 9728 protected resource metadata, RFC 8414 and OpenID
//! discovery), how its tokens are had (client credentials; RFC 8693 token exchange of
//! each principal's verified client token; each principal's consent through the
//! authorization code grant with PKCE, kept in the vault, `mcpgate-store`), with
//! `resource` (RFC 8707) on every request,
//! and each token kept and renewed under one flight. The transports see only
//! [`mcpgate_upstream::Credentials`]: a [`Source`] per server gives each session the
//! credential of its principal. No token, code, verifier or secret is ever logged,
//! shown or put in an error.
//!
//! ## Layout
//! - `settings.rs`: [`Settings`], a server's checked `[server.oauth]`; [`Secret`].
//! - `client.rs`: the HTTP client toward authorization servers; a token as given.
//! - `discovery.rs`: protected resource and authorization server metadata.
//! - `authority.rs`: one server's authorization server (client, settings, discovery).
//! - `cached.rs`: a token shared by its users, renewed under one flight.
//! - `subjects.rs`: [`Subjects`], each principal's latest verified client token.
//! - `source.rs`: [`Source`], the [`mcpgate_upstream::Credentials`] of one server.
//! - `delegated.rs`: the authorization-code grant: a principal's consent, PKCE, refresh,
//!   dynamic client registration.
//! - `grants.rs`: [`Grants`], the users' consents in the vault, and the callback.
//! - `pkce.rs`: random states and verifiers, S256, query strings.
//! - `error.rs`: [`OAuthError`].

mod authority;
mod cached;
mod client;
mod delegated;
mod discovery;
mod error;
mod grants;
mod pkce;
mod settings;
mod source;
mod subjects;

pub use discovery::ServerMetadata;
pub use error::{OAuthError, Step};
pub use grants::{Callback, Completed, GrantInfo, Grants};
pub use settings::{Client, ClientAuth, Grant, Secret, Settings};
pub use source::{Source, SourceError};
pub use subjects::Subjects;
