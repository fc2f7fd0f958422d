//! The authorization-code grant: each principal consents once per server (PKCE S256,
//! `resource` on every request), and their tokens are kept in the vault, used by every
//! session of theirs, refreshed before expiry; a refresh the authorization server refuses
//! means consenting again. Without a configured client id the gateway registers itself
//! (RFC 7591), once per server and issuer.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use mcpgate_upstream::{Cause, Consent, CredentialError};
use serde::{Deserialize, Serialize};

use crate::authority::Authority;
use crate::cached::{Cached, Fetch, Principals, TokenFuture};
use crate::client::Token;
use crate::error::{OAuthError, Step};
use crate::grants::{Delegate, Grants, Pending};
use crate::pkce;
use crate::settings::{Client, ClientAuth, Secret};

/// A dynamically registered client (sealed in the vault).
#[derive(Serialize, Deserialize)]
struct Registered {
    client_id: String,
    client_secret: Option<String>,
}

/// One server's users' grants.
#[derive(Debug)]
pub(crate) struct Delegated {
    pub(crate) authority: Arc<Authority>,
    pub(crate) grants: Arc<Grants>,
    pub(crate) principals: Principals<UserGrant>,
}

/// One principal's grant toward one server.
#[derive(Debug)]
pub(crate) struct UserGrant {
    authority: Arc<Authority>,
    grants: Arc<Grants>,
    principal: Arc<str>,
    /// The consent asked for and not yet given (one at a time, until it expires).
    pending: Mutex<Option<(Consent, Instant)>>,
}

impl Delegated {
    /// `principal`'s grant (made the first time).
    pub(crate) fn user(&self, principal: &str) -> Arc<Cached<UserGrant>> {
        self.principals.get(principal, |principal| UserGrant {
            authority: self.authority.clone(),
            grants: self.grants.clone(),
            principal,
            pending: Mutex::new(None),
        })
    }
}

impl Delegate for Delegated {
    fn redeem<'a>(&'a self, code: &'a str, p: &'a Pending) -> TokenFuture<'a> {
        Box::pin(async move {
            let a = &self.authority;
            let client = client(a, &self.grants).await?;
            let redirect = self.grants.redirect_uri();
            let fields = [
                ("code", code),
                ("redirect_uri", redirect.as_str()),
                ("code_verifier", p.verifier.as_str()),
            ];
            let token = a.token_as(&client, "authorization_code", &fields).await?;
            let issuer = issuer(a).await;
            self.grants
                .save(&a.settings.server, &p.principal, (&token, &client), &issuer)
                .await?;
            Ok(token)
        })
    }

    fn settled(&self, principal: &str) {
        if let Some(c) = self.principals.peek(principal) {
            c.forget();
            if let Ok(mut p) = c.fetch.pending.lock() {
                *p = None;
            }
        }
    }
}

/// The issuer, for the grant's shown metadata.
async fn issuer(a: &Authority) -> String {
    match (&a.settings.issuer, a.found().await) {
        (Some(i), _) => i.clone(),
        (None, Ok(f)) => f.server.issuer.clone(),
        (None, Err(_)) => String::new(),
    }
}

/// The gateway's client at the server's authorization server: configured, or registered
/// (once; kept in the vault by server and issuer).
async fn client(a: &Authority, grants: &Grants) -> Result<Client, CredentialError> {
    if a.settings.client.id.is_some() {
        return Ok(a.settings.client.clone());
    }
    let found = a.found().await?;
    // Keyed by issuer (credentials are bound to the server that issued them) and by
    // callback (a client registered for another one could not complete a consent).
    let key = format!(
        "{}|{}|{}",
        a.settings.server,
        found.server.issuer,
        grants.redirect_uri()
    );
    let store = grants.store()?;
    let bad = |e: serde_json::Error| CredentialError::Unavailable(Cause::new(e));
    let vault = |e: mcpgate_store::StoreError| CredentialError::Unavailable(Cause::new(e));
    let registered = match store.get("client", &key).await.map_err(vault)? {
        Some(e) => serde_json::from_slice::<Registered>(&e.value).map_err(bad)?,
        None => {
            let endpoint =
                found
                    .server
                    .registration_endpoint
                    .clone()
                    .ok_or(OAuthError::Undiscovered(
                        "registration endpoint (or configure client_id)",
                    ))?;
            let body = serde_json::json!({
                "client_name": "mcpgate",
                "redirect_uris": [*grants.redirect_uri()],
                "grant_types": ["authorization_code", "refresh_token"],
                "response_types": ["code"],
                "token_endpoint_auth_method": "none",
            });
            let r: Registered = a
                .client
                .post_json(Step::Registration, &endpoint, &body)
                .await?;
            let meta =
                serde_json::json!({"server": a.settings.server, "issuer": found.server.issuer});
            let value = serde_json::to_vec(&r).map_err(bad)?;
            store
                .put("client", &key, &value, &meta, None)
                .await
                .map_err(vault)?;
            r
        }
    };
    Ok(Client {
        auth: if registered.client_secret.is_some() {
            ClientAuth::Basic
        } else {
            ClientAuth::None
        },
        secret: registered.client_secret.map(Secret::new),
        id: Some(registered.client_id),
    })
}

impl UserGrant {
    fn server(&self) -> &str {
        &self.authority.settings.server
    }

    /// Refreshes with `refresh` as `client` (the one the grant was issued to): the new
    /// tokens are kept (the refresh token too, or the old one when none came back); a
    /// refusal means consenting again.
    async fn refresh(
        &self,
        refresh: &Secret,
        issued_to: Option<Client>,
    ) -> Result<Token, CredentialError> {
        let client = match issued_to {
            Some(c) => c,
            None => client(&self.authority, &self.grants).await?,
        };
        let fields = [("refresh_token", refresh.expose())];
        match self
            .authority
            .token_as(&client, "refresh_token", &fields)
            .await
        {
            Ok(mut t) => {
                t.refresh = t.refresh.or_else(|| Some(refresh.clone()));
                let issuer = issuer(&self.authority).await;
                self.grants
                    .save(self.server(), &self.principal, (&t, &client), &issuer)
                    .await?;
                Ok(t)
            }
            Err(e) if e.is_invalid_grant() => {
                tracing::info!(server = self.server(), principal = %self.principal, "the authorization server refused the refresh token; asking for consent again");
                if let Err(e) = self.grants.revoke(self.server(), &self.principal).await {
                    return Err(CredentialError::Unavailable(Cause::new(e)));
                }
                Err(self.consent().await)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// The consent to ask for: the one pending, or a new one (its state and verifier in
    /// the vault, single use).
    async fn consent(&self) -> CredentialError {
        match self.start().await {
            Ok(c) => CredentialError::Consent(c),
            Err(e) => e,
        }
    }

    async fn start(&self) -> Result<Consent, CredentialError> {
        if let Ok(p) = self.pending.lock()
            && let Some((c, at)) = p.as_ref()
            && at.elapsed() < self.grants.consent_ttl / 2
        {
            return Ok(c.clone());
        }
        let a = &self.authority;
        let client = client(a, &self.grants).await?;
        let endpoint = a
            .found()
            .await?
            .server
            .authorization_endpoint
            .clone()
            .ok_or(OAuthError::Undiscovered("authorization endpoint"))?;
        let (state, verifier) = (pkce::random(32), pkce::random(32));
        let pending = Pending {
            server: self.server().to_owned(),
            principal: self.principal.to_string(),
            verifier,
            elicitation_id: pkce::random(16),
        };
        self.grants.begin(&state, &pending).await?;
        let challenge = pkce::challenge(&pending.verifier);
        let redirect = self.grants.redirect_uri();
        let scope = a.scope().await;
        let mut q = vec![
            ("response_type", "code"),
            ("client_id", client.id.as_deref().unwrap_or_default()),
            ("redirect_uri", redirect.as_str()),
            ("state", state.as_str()),
            ("code_challenge", challenge.as_str()),
            ("code_challenge_method", "S256"),
            ("resource", a.settings.resource.as_str()),
        ];
        if let Some(s) = scope.as_deref() {
            q.push(("scope", s));
        }
        let sep = if endpoint.contains('?') { '&' } else { '?' };
        let consent = Consent {
            url: format!("{endpoint}{sep}{}", pkce::query(&q)),
            elicitation_id: pending.elicitation_id,
            message: format!(
                "Authorize the gateway to use {} on your behalf.",
                self.server()
            ),
        };
        if let Ok(mut p) = self.pending.lock() {
            *p = Some((consent.clone(), Instant::now()));
        }
        Ok(consent)
    }
}

impl Fetch for UserGrant {
    /// The vault is read every time: another replica may have refreshed (and rotated)
    /// the grant, or the user consented through another replica.
    fn fetch<'a>(&'a self, previous: Option<&'a Token>) -> TokenFuture<'a> {
        Box::pin(async move {
            let margin = self.authority.settings.refresh_before;
            let Some(kept) = self.grants.load(self.server(), &self.principal).await? else {
                return Err(self.consent().await);
            };
            let replaced = previous.is_none_or(|p| p.header != kept.token.header);
            if replaced && kept.token.fresh(margin) {
                return Ok(kept.token);
            }
            match &kept.token.refresh {
                Some(r) => self.refresh(r, kept.client).await,
                None => Err(self.consent().await),
            }
        })
    }
}
