//! One server's authorization server as the gateway sees it: the HTTP client toward it,
//! the settings, and what discovery found (kept once found).

use std::sync::Arc;

use crate::client::{AsClient, Token};
use crate::discovery::{Found, discover};
use crate::error::OAuthError;
use crate::settings::Settings;

/// A server's authorization server.
#[derive(Debug)]
pub(crate) struct Authority {
    pub(crate) settings: Arc<Settings>,
    pub(crate) client: AsClient,
    found: tokio::sync::OnceCell<Found>,
}

impl Authority {
    /// The authority of `settings` (its TLS files loaded now).
    pub(crate) fn new(settings: Arc<Settings>) -> Result<Self, mcpgate_tls::TlsError> {
        let client = AsClient::new(&settings.tls, settings.timeout)?;
        Ok(Authority {
            settings,
            client,
            found: tokio::sync::OnceCell::new(),
        })
    }

    /// What discovery found (asked once it succeeds; a failure is asked again next time).
    pub(crate) async fn found(&self) -> Result<&Found, OAuthError> {
        let s = &self.settings;
        self.found
            .get_or_try_init(|| {
                discover(
                    &self.client,
                    &s.server_url,
                    &s.resource,
                    s.issuer.as_deref(),
                )
            })
            .await
    }

    /// The token endpoint: configured, or discovered.
    pub(crate) async fn token_endpoint(&self) -> Result<String, OAuthError> {
        if let Some(t) = &self.settings.token_endpoint {
            return Ok(t.clone());
        }
        self.found()
            .await?
            .server
            .token_endpoint
            .clone()
            .ok_or(OAuthError::Undiscovered("token endpoint"))
    }

    /// The scope to ask for: configured, or every scope the resource lists (none when it
    /// lists none and none is configured).
    pub(crate) async fn scope(&self) -> Option<String> {
        if let Some(s) = &self.settings.scope {
            return Some(s.clone());
        }
        let found = self.found().await.ok()?;
        (!found.scopes.is_empty()).then(|| found.scopes.join(" "))
    }

    /// A token request of `grant` with `fields` as `client`, plus `resource` (no scope: the
    /// grant has it).
    pub(crate) async fn token_as(
        &self,
        client: &crate::settings::Client,
        grant: &str,
        fields: &[(&str, &str)],
    ) -> Result<Token, OAuthError> {
        let endpoint = self.token_endpoint().await?;
        let mut form: Vec<(&str, &str)> = vec![("grant_type", grant)];
        form.extend_from_slice(fields);
        form.push(("resource", &self.settings.resource));
        self.client.token(&endpoint, client, &form).await
    }

    /// A token request of `grant` with `fields`, plus `resource` and the scope.
    pub(crate) async fn token(
        &self,
        grant: &str,
        fields: &[(&str, &str)],
    ) -> Result<Token, OAuthError> {
        let endpoint = self.token_endpoint().await?;
        let scope = self.scope().await;
        let mut form: Vec<(&str, &str)> = vec![("grant_type", grant)];
        form.extend_from_slice(fields);
        form.push(("resource", &self.settings.resource));
        if let Some(s) = scope.as_deref() {
            form.push(("scope", s));
        }
        self.client
            .token(&endpoint, &self.settings.client, &form)
            .await
    }
}
