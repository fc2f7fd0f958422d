//! [`OAuthError`]: why the gateway could not get a token. No variant carries a token, a
//! code, a verifier or a client secret: what an authorization server says about a refusal
//! (its `error` code and description) is kept, the request's secrets never.

use mcpgate_upstream::Cause;

/// Which document or endpoint of the OAuth dance a failure was at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// The server's protected resource metadata (RFC 9728).
    ResourceMetadata,
    /// The authorization server's metadata (RFC 8414, OpenID discovery).
    ServerMetadata,
    /// The token endpoint.
    Token,
    /// Dynamic client registration (RFC 7591).
    Registration,
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Step::ResourceMetadata => "protected resource metadata",
            Step::ServerMetadata => "authorization server metadata",
            Step::Token => "token endpoint",
            Step::Registration => "client registration",
        })
    }
}

/// Why a token could not be had.
#[derive(Debug, Clone, thiserror::Error)]
pub enum OAuthError {
    /// The endpoint could not be reached (refused, reset, TLS).
    #[error("{step} {url}: {source}")]
    Unreachable {
        /// Which endpoint.
        step: Step,
        /// Its URL.
        url: String,
        /// What the HTTP client said.
        source: Cause,
    },
    /// The endpoint did not answer in time.
    #[error("{step} {url}: no answer within {after:?}")]
    Timeout {
        /// Which endpoint.
        step: Step,
        /// Its URL.
        url: String,
        /// The bound.
        after: std::time::Duration,
    },
    /// The endpoint answered with a failure status and no OAuth error.
    #[error("{step} {url}: HTTP {status}")]
    Status {
        /// Which endpoint.
        step: Step,
        /// Its URL.
        url: String,
        /// The status.
        status: u16,
    },
    /// The document is not what the specification says it is.
    #[error("{step} {url}: {source}")]
    Document {
        /// Which document.
        step: Step,
        /// Its URL.
        url: String,
        /// Why it is refused.
        source: Cause,
    },
    /// The authorization server refused the request with an OAuth error.
    #[error("the authorization server refused: {code}{}", description.as_deref().map(|d| format!(" ({d})")).unwrap_or_default())]
    Refused {
        /// Its `error` (`invalid_grant`, `invalid_client`, `invalid_target`, …).
        code: String,
        /// Its `error_description`, when it gave one.
        description: Option<String>,
    },
    /// Metadata that names another issuer or resource than the one it was fetched for.
    #[error("{step} names {found:?}, expected {expected:?}")]
    Mismatch {
        /// Which document.
        step: Step,
        /// What it names.
        found: String,
        /// What was asked for.
        expected: String,
    },
    /// Discovery found no authorization server, or it has no token endpoint.
    #[error(
        "no {0} could be found for this server; configure oauth.issuer or oauth.token_endpoint"
    )]
    Undiscovered(&'static str),
    /// Token exchange: the principal has presented no verified token to exchange yet.
    #[error("no verified token of this principal to exchange")]
    NoSubject,
}

impl OAuthError {
    /// Whether this is the authorization server saying a grant (a refresh token, a code)
    /// is no longer good.
    pub fn is_invalid_grant(&self) -> bool {
        matches!(self, OAuthError::Refused { code, .. } if code == "invalid_grant")
    }
}

impl From<OAuthError> for mcpgate_upstream::CredentialError {
    fn from(e: OAuthError) -> Self {
        mcpgate_upstream::CredentialError::Unavailable(Cause::new(e))
    }
}
