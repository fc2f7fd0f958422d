//! What a server's `[server.oauth]` says, checked (the binary parses the file): the grant,
//! the client's identity, where the authorization server is, and the token's audience.

use std::fmt;
use std::time::Duration;

/// A secret from configuration (a client secret): shown as `<redacted>` everywhere.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Keeps `s`.
    pub fn new(s: impl Into<String>) -> Self {
        Secret(s.into())
    }

    /// The secret itself, to put in a request.
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// How the gateway authenticates itself at the token endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ClientAuth {
    /// HTTP Basic with the client id and secret (RFC 6749 §2.3.1; the default).
    #[default]
    Basic,
    /// The id and secret in the form body.
    Post,
    /// A public client: the id only.
    None,
}

/// The gateway's identity at the authorization server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Client {
    /// Its `client_id` (`None`: registered dynamically, RFC 7591).
    pub id: Option<String>,
    /// Its secret, for a confidential client.
    pub secret: Option<Secret>,
    /// How the secret is presented.
    pub auth: ClientAuth,
}

/// Which grant gives the server's tokens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Grant {
    /// The gateway's own identity (RFC 6749 §4.4): one token for every session.
    ClientCredentials,
    /// Each principal's verified client token exchanged for one with the server's
    /// audience (RFC 8693), per principal.
    TokenExchange {
        /// `audience`, when the security token service wants one besides `resource`.
        audience: Option<String>,
    },
    /// Each principal consents once (authorization code with PKCE); their tokens are
    /// kept in the vault.
    AuthorizationCode,
}

impl Grant {
    /// Its name in configuration and logs.
    pub fn as_str(&self) -> &'static str {
        match self {
            Grant::ClientCredentials => "client_credentials",
            Grant::TokenExchange { .. } => "token_exchange",
            Grant::AuthorizationCode => "authorization_code",
        }
    }
}

/// One server's OAuth settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// The server's name (logs, metrics, the vault's key).
    pub server: String,
    /// The server's MCP endpoint (where its protected resource metadata is discovered).
    pub server_url: String,
    /// The grant.
    pub grant: Grant,
    /// The gateway's client identity.
    pub client: Client,
    /// The `resource` of every authorization, token and refresh request (RFC 8707).
    pub resource: String,
    /// The `scope` asked for (`None`: the server's `scopes_supported`, or none).
    pub scope: Option<String>,
    /// The authorization server's issuer (`None`: discovered from the server).
    pub issuer: Option<String>,
    /// The token endpoint (`None`: from the authorization server's metadata).
    pub token_endpoint: Option<String>,
    /// A token is renewed this long before it expires.
    pub refresh_before: Duration,
    /// The bound on each request to the authorization server.
    pub timeout: Duration,
    /// TLS toward the authorization server.
    pub tls: mcpgate_tls::ClientOptions,
}

impl Settings {
    /// A digest of what configures this source (no secret in the clear), so that a
    /// reload that changes it changes the server.
    pub fn key(&self) -> String {
        format!(
            "{}|{}|{:?}|{:?}|{}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{:x}",
            self.server,
            self.grant.as_str(),
            self.grant,
            self.client.id,
            self.resource,
            self.scope,
            self.issuer,
            self.token_endpoint,
            self.refresh_before,
            self.client.auth,
            self.tls,
            secret_digest(self.client.secret.as_ref()),
        )
    }
}

/// A mark of a secret, so that changing it changes [`Settings::key`]: a hash under keys
/// drawn once per process, so it says nothing outside this process.
fn secret_digest(s: Option<&Secret>) -> u64 {
    use std::hash::BuildHasher;
    static KEYS: std::sync::OnceLock<std::collections::hash_map::RandomState> =
        std::sync::OnceLock::new();
    KEYS.get_or_init(Default::default)
        .hash_one(s.map(Secret::expose))
}
