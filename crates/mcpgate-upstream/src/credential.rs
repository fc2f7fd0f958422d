//! Where an upstream request's `Authorization` comes from when it is not a static header.
//!
//! The transports know only this seam: a server's [`Auth`] (built above them, from
//! configuration: `mcpgate-oauth`) gives each session a [`Credential`] for its principal,
//! and every request of that session — POST, GET stream, DELETE, legacy SSE — asks it for
//! the header value. A `401` answer makes the session ask once for a new value
//! ([`Credential::refused`]) and send the request again; what still fails is an
//! [`UpstreamError::Credential`](crate::UpstreamError::Credential) naming why.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use http::HeaderValue;

use crate::error::UpstreamError;
pub use crate::error::{Consent, CredentialError};

/// A future of a credential's header value.
pub type CredentialFuture<'a> =
    Pin<Box<dyn Future<Output = Result<HeaderValue, CredentialError>> + Send + 'a>>;

/// One principal's credential toward one server (shared by that principal's sessions).
pub trait Credential: Send + Sync + fmt::Debug + 'static {
    /// The value while it is fresh, without waiting (the request path's common case).
    fn cached(&self) -> Option<HeaderValue>;
    /// The value for the next request: fetched (once, however many ask at the same time)
    /// when there is none or it is about to expire.
    fn current(&self) -> CredentialFuture<'_>;
    /// The server refused `used` (HTTP 401): a new value, fetched once for everyone who
    /// saw `used` refused, or why there is none (the user must consent again).
    fn refused<'a>(&'a self, used: &'a HeaderValue) -> CredentialFuture<'a>;
}

/// Gives each principal its credential toward one server.
pub trait Credentials: Send + Sync + fmt::Debug + 'static {
    /// The credential of `principal` (`None`: a client the gateway did not authenticate).
    fn for_principal(
        &self,
        principal: Option<&str>,
    ) -> Result<Arc<dyn Credential>, CredentialError>;
}

/// A server's credential source, as a [`Target`](crate::Target) holds it: compared by
/// what configured it (`key`), so a reload that changes the configuration changes the
/// target.
#[derive(Clone)]
pub struct Auth {
    source: Arc<dyn Credentials>,
    key: Arc<str>,
}

impl Auth {
    /// `source`, configured as `key` says (a digest of its configuration, no secret).
    pub fn new(source: Arc<dyn Credentials>, key: impl Into<Arc<str>>) -> Self {
        Auth {
            source,
            key: key.into(),
        }
    }

    /// The credential of `principal`.
    pub fn for_principal(
        &self,
        principal: Option<&str>,
    ) -> Result<Arc<dyn Credential>, CredentialError> {
        self.source.for_principal(principal)
    }
}

impl PartialEq for Auth {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
    }
}

impl Eq for Auth {}

impl fmt::Debug for Auth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Auth").field(&self.key).finish()
    }
}

/// Sends one request with `credential`'s `Authorization` (none without a credential).
/// `send(auth, last)` sends it once; `last` says no second try follows, so it may give away
/// what it would otherwise keep for one (the body). When `refused` says the server refused
/// the value (HTTP 401), the credential is renewed once and the request sent once more;
/// what the server answers then is the answer.
pub(crate) async fn authorized<R, Fut>(
    credential: Option<&Arc<dyn Credential>>,
    mut send: impl FnMut(Option<HeaderValue>, bool) -> Fut,
    refused: impl Fn(&R) -> bool,
) -> Result<R, UpstreamError>
where
    Fut: Future<Output = Result<R, UpstreamError>>,
{
    let Some(c) = credential else {
        return send(None, true).await;
    };
    let used = match c.cached() {
        Some(v) => v,
        None => c.current().await?,
    };
    let first = send(Some(used.clone()), false).await?;
    if !refused(&first) {
        return Ok(first);
    }
    drop(first);
    let renewed = c.refused(&used).await?;
    send(Some(renewed), true).await
}
