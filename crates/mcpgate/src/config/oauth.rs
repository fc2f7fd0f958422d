//! A server's `[server.oauth]`: how the gateway gets the server's tokens (client
//! credentials, token exchange of each principal's verified JWT), checked and turned
//! into the server's credential source. TLS toward the authorization server is the
//! server's own (`ca_file`, client certificate).

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use anyhow::{Context, bail};
use mcpgate_oauth::{Client, ClientAuth, Grant, Secret, Settings, Source, Subjects};
use mcpgate_upstream::Auth;
use serde::{Deserialize, Serialize};

use super::check;

/// `[server.oauth]` as written.
#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawOAuth {
    /// `"client_credentials"` (the gateway's own identity), `"token_exchange"` (each
    /// principal's verified JWT exchanged, RFC 8693) or `"authorization_code"` (each
    /// principal consents once; their tokens are kept in `[vault]`).
    pub(super) grant: String,
    /// The gateway's client id at the authorization server.
    pub(super) client_id: Option<String>,
    /// Its secret, or
    pub(super) client_secret: Option<String>,
    /// the environment variable that holds it.
    pub(super) client_secret_env: Option<String>,
    /// `"client_secret_basic"` (the default), `"client_secret_post"` or `"none"`.
    pub(super) client_auth: Option<String>,
    /// The `resource` of every token request (RFC 8707). Default: the server's `url`.
    pub(super) resource: Option<String>,
    /// The scope asked for. Default: the server's `scopes_supported`, or none.
    pub(super) scope: Option<String>,
    /// The authorization server's issuer. Default: discovered from the server's
    /// protected resource metadata (RFC 9728).
    pub(super) issuer: Option<String>,
    /// The token endpoint. Default: from the issuer's metadata (RFC 8414).
    pub(super) token_endpoint: Option<String>,
    /// Token exchange: the `audience` to ask for besides `resource`.
    pub(super) audience: Option<String>,
    /// How long before expiry a token is renewed. Default 60s (at most half its life).
    #[serde(default, with = "humantime_serde")]
    pub(super) refresh_before: Option<Duration>,
    /// The bound on each request to the authorization server. Default 10s.
    #[serde(default, with = "humantime_serde")]
    pub(super) timeout: Option<Duration>,
}

/// Each principal's latest verified client JWT, one per process (token exchange reads
/// it; the front's authenticator writes it), kept across reloads.
pub(crate) fn subjects() -> Arc<Subjects> {
    static SUBJECTS: OnceLock<Arc<Subjects>> = OnceLock::new();
    SUBJECTS.get_or_init(Default::default).clone()
}

impl RawOAuth {
    /// Whether the grant exchanges the clients' tokens (then `[auth.jwt]` is needed).
    pub(super) fn exchanges(&self) -> bool {
        self.grant == "token_exchange"
    }

    /// The server's credential source; `server` names it, `url` is its endpoint.
    pub(super) fn validate(
        &self,
        at: &str,
        server: &str,
        url: &str,
        tls: &mcpgate_tls::ClientOptions,
    ) -> anyhow::Result<Auth> {
        let at = format!("{at}: oauth");
        let settings = Settings {
            server: server.to_owned(),
            server_url: url.to_owned(),
            grant: self.grant(&at)?,
            client: self.client(&at)?,
            resource: self.resource.clone().unwrap_or_else(|| url.to_owned()),
            scope: self.scope.clone(),
            issuer: self.issuer.clone(),
            token_endpoint: self.token_endpoint.clone(),
            refresh_before: self.refresh_before.unwrap_or(Duration::from_secs(60)),
            timeout: self.timeout.unwrap_or(Duration::from_secs(10)),
            tls: tls.clone(),
        };
        for (key, u) in [
            ("resource", Some(&settings.resource)),
            ("issuer", settings.issuer.as_ref()),
            ("token_endpoint", settings.token_endpoint.as_ref()),
        ] {
            if let Some(u) = u {
                check::url(&format!("{at}.{key}"), u)?;
            }
        }
        if settings.timeout.is_zero() {
            bail!("{at}.timeout must be above zero");
        }
        let key = settings.key();
        let grants = super::vault::grants();
        let source = Source::new(settings, Some(subjects()), grants).with_context(|| at.clone())?;
        Ok(Auth::new(Arc::new(source), key))
    }

    fn grant(&self, at: &str) -> anyhow::Result<Grant> {
        let grant = match self.grant.as_str() {
            "client_credentials" => Grant::ClientCredentials,
            "token_exchange" => Grant::TokenExchange {
                audience: self.audience.clone(),
            },
            "authorization_code" => Grant::AuthorizationCode,
            g => bail!(
                "{at}.grant {g:?} is not \"client_credentials\", \"token_exchange\" or \"authorization_code\""
            ),
        };
        if self.audience.is_some() && grant == Grant::ClientCredentials {
            bail!("{at}.audience is for grant \"token_exchange\"");
        }
        Ok(grant)
    }

    fn client(&self, at: &str) -> anyhow::Result<Client> {
        let secret = match (&self.client_secret, &self.client_secret_env) {
            (Some(_), Some(_)) => bail!("{at}: give client_secret or client_secret_env, not both"),
            (Some(s), None) => Some(Secret::new(s.clone())),
            (None, Some(var)) => {
                Some(Secret::new(std::env::var(var).with_context(|| {
                    format!("{at}.client_secret_env: {var} is not set")
                })?))
            }
            (None, None) => None,
        };
        let auth = match self.client_auth.as_deref() {
            None | Some("client_secret_basic") => ClientAuth::Basic,
            Some("client_secret_post") => ClientAuth::Post,
            Some("none") => ClientAuth::None,
            Some(m) => bail!(
                "{at}.client_auth {m:?} is not \"client_secret_basic\", \"client_secret_post\" or \"none\""
            ),
        };
        let registers = self.grant == "authorization_code" && self.client_id.is_none();
        if self.client_id.is_none() && !registers {
            bail!("{at}: client_id is needed for grant {:?}", self.grant);
        }
        if secret.is_some() && registers {
            bail!(
                "{at}: client_secret without client_id (the gateway registers itself when client_id is not given)"
            );
        }
        if secret.is_none() && auth != ClientAuth::None && !registers {
            bail!(
                "{at}: client_secret (or client_secret_env) is needed, or client_auth = \"none\""
            );
        }
        Ok(Client {
            id: self.client_id.clone(),
            secret,
            auth,
        })
    }
}
