//! [`Grants`]: the users' consents, one per principal × server, kept in the vault (the
//! store, sealed), and the callback that completes a consent. One per gateway; each
//! authorization-code server registers with it so the callback can reach it.
//!
//! Vault entries (kind / key → sealed value; shown metadata):
//! - `grant` / `{server}/{principal}` → access and refresh tokens, expiry; principal,
//!   server, scope, when obtained.
//! - `consent` / `{state}` → server, principal, PKCE verifier, elicitation id; expires
//!   after the consent's lifetime, taken once (single use, on any replica).
//! - `client` / `{server}|{issuer}|{callback}` → a dynamically registered client's id
//!   and secret.

use std::collections::HashMap;
use std::sync::{Arc, RwLock, Weak};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwapOption;
use http::HeaderValue;
use mcpgate_store::{Store, StoreError};
use mcpgate_upstream::{Cause, CredentialError};
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;

use crate::client::Token;
use crate::settings::{Client, ClientAuth, Secret};

/// What a stored grant holds (sealed at rest): the tokens, and the client they were
/// issued to (a refresh must come from that client).
#[derive(Serialize, Deserialize)]
pub(crate) struct Stored {
    pub(crate) access: String,
    pub(crate) refresh: Option<String>,
    pub(crate) expires_at: Option<i64>,
    pub(crate) client_id: Option<String>,
    pub(crate) client_secret: Option<String>,
}

/// A grant as loaded: its token, and the client it was issued to.
pub(crate) struct Kept {
    pub(crate) token: Token,
    pub(crate) client: Option<Client>,
}

/// A consent in progress (sealed at rest).
#[derive(Serialize, Deserialize)]
pub(crate) struct Pending {
    pub(crate) server: String,
    pub(crate) principal: String,
    pub(crate) verifier: String,
    pub(crate) elicitation_id: String,
}

/// A consent given: who, for which server, under which elicitation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completed {
    /// The server.
    pub server: String,
    /// The principal who consented.
    pub principal: String,
    /// The URL-mode elicitation it completes.
    pub elicitation_id: String,
}

/// What the callback answers the user's browser.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Callback {
    /// The HTTP status.
    pub status: u16,
    /// What to tell the user (no secret).
    pub message: String,
    /// The consent given, when it was.
    pub completed: Option<Completed>,
}

/// A grant as the admin API shows it: never a token.
#[derive(Debug, Clone, Serialize)]
pub struct GrantInfo {
    /// The server.
    pub server: String,
    /// The principal.
    pub principal: String,
    /// Its shown metadata (scope, issuer, when obtained).
    pub meta: serde_json::Value,
    /// When it was last written (seconds since the epoch).
    pub updated_at: i64,
}

/// What a server that delegates to its users does when the callback settles one of
/// its consents.
pub(crate) trait Delegate: Send + Sync + std::fmt::Debug {
    /// Exchanges the code of `pending` for tokens (with its verifier).
    fn redeem<'a>(&'a self, code: &'a str, pending: &'a Pending) -> crate::cached::TokenFuture<'a>;
    /// The principal's consent settled (given, refused or revoked): forget what is kept
    /// in memory for it.
    fn settled(&self, principal: &str);
}

/// The users' consents, one per gateway.
#[derive(Debug)]
pub struct Grants {
    store: ArcSwapOption<Store>,
    /// The gateway's callback URL (the `redirect_uri` of every authorization).
    redirect_uri: arc_swap::ArcSwap<String>,
    /// How long a consent may take.
    pub(crate) consent_ttl: Duration,
    servers: RwLock<HashMap<String, Weak<dyn Delegate>>>,
    completed: broadcast::Sender<Completed>,
}

pub(crate) fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_secs() as i64
}

fn vault_error(e: StoreError) -> CredentialError {
    CredentialError::Unavailable(Cause::new(e))
}

impl Grants {
    /// Consents completed at `redirect_uri` (the gateway's `/oauth/callback`), each
    /// allowed `consent_ttl`; the vault is attached once open.
    pub fn new(redirect_uri: String, consent_ttl: Duration) -> Arc<Self> {
        Arc::new(Grants {
            store: ArcSwapOption::empty(),
            redirect_uri: arc_swap::ArcSwap::from_pointee(redirect_uri),
            consent_ttl,
            servers: RwLock::new(HashMap::new()),
            completed: broadcast::channel(256).0,
        })
    }

    /// The gateway's callback URL.
    pub fn redirect_uri(&self) -> Arc<String> {
        self.redirect_uri.load_full()
    }

    /// Sets the gateway's callback URL (once the listener's address is known).
    pub fn set_redirect_uri(&self, url: String) {
        self.redirect_uri.store(Arc::new(url));
    }

    /// Keeps consents in `store` from now on.
    pub fn attach(&self, store: Store) {
        self.store.store(Some(Arc::new(store)));
    }

    /// Every consent given from now on.
    pub fn completions(&self) -> broadcast::Receiver<Completed> {
        self.completed.subscribe()
    }

    pub(crate) fn store(&self) -> Result<Arc<Store>, CredentialError> {
        self.store
            .load_full()
            .ok_or_else(|| vault_error(StoreError::NotOpen))
    }

    pub(crate) fn register(&self, server: &str, d: Weak<dyn Delegate>) {
        if let Ok(mut s) = self.servers.write() {
            s.insert(server.to_owned(), d);
        }
    }

    fn delegate(&self, server: &str) -> Option<Arc<dyn Delegate>> {
        self.servers.read().ok()?.get(server)?.upgrade()
    }

    /// `principal`'s grant toward `server`, if they consented.
    pub(crate) async fn load(
        &self,
        server: &str,
        principal: &str,
    ) -> Result<Option<Kept>, CredentialError> {
        let key = format!("{server}/{principal}");
        let Some(e) = self
            .store()?
            .get("grant", &key)
            .await
            .map_err(vault_error)?
        else {
            return Ok(None);
        };
        let s: Stored = serde_json::from_slice(&e.value)
            .map_err(|e| CredentialError::Unavailable(Cause::new(e)))?;
        let refresh = s.refresh.map(Secret::new);
        let mut header = HeaderValue::try_from(format!("Bearer {}", s.access))
            .map_err(|e| CredentialError::Unavailable(Cause::new(e)))?;
        header.set_sensitive(true);
        let expires = s.expires_at.map(|at| {
            let left = Duration::from_secs(u64::try_from(at - unix_now()).unwrap_or(0));
            (Instant::now() + left, left.max(Duration::from_secs(1)))
        });
        let token = Token {
            header,
            expires,
            refresh,
            scope: e.meta["scope"].as_str().map(str::to_owned),
        };
        let client = s.client_id.map(|id| Client {
            id: Some(id),
            auth: if s.client_secret.is_some() {
                ClientAuth::Basic
            } else {
                ClientAuth::None
            },
            secret: s.client_secret.map(Secret::new),
        });
        Ok(Some(Kept { token, client }))
    }

    /// Keeps `token`, issued to `client`, as `principal`'s grant toward `server`.
    pub(crate) async fn save(
        &self,
        server: &str,
        principal: &str,
        (token, client): (&Token, &Client),
        issuer: &str,
    ) -> Result<(), CredentialError> {
        let access = token
            .header
            .to_str()
            .ok()
            .and_then(|h| h.strip_prefix("Bearer "))
            .unwrap_or_default()
            .to_owned();
        let stored = Stored {
            access,
            refresh: token.refresh.as_ref().map(|r| r.expose().to_owned()),
            expires_at: token.expires.map(|(at, _)| {
                unix_now() + at.saturating_duration_since(Instant::now()).as_secs() as i64
            }),
            client_id: client.id.clone(),
            client_secret: client.secret.as_ref().map(|s| s.expose().to_owned()),
        };
        let value =
            serde_json::to_vec(&stored).map_err(|e| CredentialError::Unavailable(Cause::new(e)))?;
        let meta = serde_json::json!({
            "server": server, "principal": principal, "scope": token.scope,
            "issuer": issuer, "obtained_at": unix_now(),
        });
        self.store()?
            .put(
                "grant",
                &format!("{server}/{principal}"),
                &value,
                &meta,
                None,
            )
            .await
            .map_err(vault_error)
    }

    /// Forgets `principal`'s grant toward `server` (revoked, or refused by the
    /// authorization server); whether there was one.
    pub async fn revoke(&self, server: &str, principal: &str) -> Result<bool, StoreError> {
        let Some(store) = self.store.load_full() else {
            return Err(StoreError::NotOpen);
        };
        let was = store
            .delete("grant", &format!("{server}/{principal}"))
            .await?;
        if let Some(d) = self.delegate(server) {
            d.settled(principal);
        }
        Ok(was)
    }

    /// Every grant, without tokens (the admin API).
    pub async fn list(&self) -> Result<Vec<GrantInfo>, StoreError> {
        let Some(store) = self.store.load_full() else {
            return Err(StoreError::NotOpen);
        };
        Ok(store
            .list("grant")
            .await?
            .into_iter()
            .filter_map(|l| {
                let (server, principal) = l.key.split_once('/')?;
                Some(GrantInfo {
                    server: server.to_owned(),
                    principal: principal.to_owned(),
                    meta: l.meta,
                    updated_at: l.updated_at,
                })
            })
            .collect())
    }

    /// Records a consent in progress under `state`.
    pub(crate) async fn begin(&self, state: &str, p: &Pending) -> Result<(), CredentialError> {
        let value =
            serde_json::to_vec(p).map_err(|e| CredentialError::Unavailable(Cause::new(e)))?;
        let meta = serde_json::json!({"server": p.server, "principal": p.principal});
        let until = unix_now() + self.consent_ttl.as_secs() as i64;
        self.store()?
            .put("consent", state, &value, &meta, Some(until))
            .await
            .map_err(vault_error)
    }

    /// The user's browser came back to the callback with `query`: the consent of its
    /// `state` (taken once) is redeemed, or refused, and the user told which.
    pub async fn callback(&self, query: &str) -> Callback {
        let answer = |status, message: &str| Callback {
            status,
            message: message.to_owned(),
            completed: None,
        };
        let Some(state) = crate::pkce::param(query, "state").filter(|s| s.len() <= 128) else {
            return answer(400, "This authorization link has no state.");
        };
        let Ok(store) = self.store() else {
            return answer(
                503,
                "The gateway's token vault is not available; try again later.",
            );
        };
        let pending = match store.take("consent", &state).await {
            Err(e) => {
                tracing::warn!(error = %e, "oauth callback: the vault is unavailable");
                return answer(
                    503,
                    "The gateway's token vault is not available; try again later.",
                );
            }
            Ok(None) => {
                tracing::info!("oauth callback with an unknown, used or expired state");
                return answer(
                    400,
                    "This authorization link is unknown, was already used, or expired. Start again from your MCP client.",
                );
            }
            Ok(Some(e)) => match serde_json::from_slice::<Pending>(&e.value) {
                Ok(p) => p,
                Err(_) => return answer(400, "This authorization link is not valid."),
            },
        };
        self.redeem(query, pending).await
    }

    async fn redeem(&self, query: &str, p: Pending) -> Callback {
        let answer = |status, message: String| Callback {
            status,
            message,
            completed: None,
        };
        let delegate = self.delegate(&p.server);
        if let Some(d) = &delegate {
            d.settled(&p.principal);
        }
        if let Some(error) = crate::pkce::param(query, "error") {
            tracing::info!(server = %p.server, principal = %p.principal, error, "the authorization server refused the consent");
            let what = error
                .chars()
                .filter(|c| c.is_ascii_graphic())
                .take(64)
                .collect::<String>();
            return answer(
                403,
                format!("The authorization was not given ({what}). Nothing was stored."),
            );
        }
        let (Some(code), Some(d)) = (crate::pkce::param(query, "code"), delegate) else {
            return answer(400, "This authorization answer carries no code.".into());
        };
        match d.redeem(&code, &p).await {
            Ok(_) => {
                tracing::info!(server = %p.server, principal = %p.principal, "consent given; the grant is kept");
                let done = Completed {
                    server: p.server,
                    principal: p.principal,
                    elicitation_id: p.elicitation_id,
                };
                let _ = self.completed.send(done.clone());
                Callback {
                    status: 200,
                    message: "Authorized. You can close this window and return to your MCP client."
                        .into(),
                    completed: Some(done),
                }
            }
            Err(e) => {
                tracing::warn!(server = %p.server, principal = %p.principal, error = %e, "the authorization code could not be redeemed");
                answer(
                    502,
                    format!("The authorization could not be completed: {e}. Nothing was stored."),
                )
            }
        }
    }
}
