//! `[vault]`: where the users' upstream grants are kept — a SQLite file (the default
//! kind) or a PostgreSQL database that replicas share — and the keys that seal them (by
//! default `session.seal_keys`); `[oauth]`: the gateway's OAuth callback, where users come
//! back after consenting to an upstream server. Both only for servers whose
//! `[server.oauth]` grant is `authorization_code`.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use anyhow::{Context, bail};
use mcpgate_oauth::Grants;
use mcpgate_store::Location;
use serde::{Deserialize, Serialize};

use super::check;
use super::session::{RawSealKey, seal_keys};

/// `[vault]` as written.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawVault {
    /// A SQLite file (created when missing; its directory must exist and be writable).
    pub(super) path: Option<PathBuf>,
    /// A PostgreSQL URL (`postgres://user:password@host:port/db`), or
    pub(super) postgres_url: Option<String>,
    /// the environment variable that holds it.
    pub(super) postgres_url_env: Option<String>,
    /// The keys that seal what the vault holds, as `session.seal_keys` (the first seals,
    /// all open). Default: `session.seal_keys`.
    #[serde(default)]
    pub(super) keys: Vec<RawSealKey>,
}

/// `[oauth]` as written (the gateway's side of upstream consents).
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawOAuthSection {
    /// The public URL of this gateway's `/oauth/callback` (the `redirect_uri` users come
    /// back to). Default: `http://{listen.addr}/oauth/callback`.
    pub(super) callback_url: Option<String>,
    /// How long a user has to consent. Default 10m.
    #[serde(default, with = "humantime_serde")]
    pub(super) consent_ttl: Option<Duration>,
}

/// The vault, checked.
#[derive(Debug)]
pub(crate) struct Vault {
    /// Where it is.
    pub(crate) location: Location,
    /// The keys that seal it.
    pub(crate) keys: Arc<mcpgate_seal::KeyRing>,
}

/// The users' consents, one per process (kept across reloads: a changed `callback_url`
/// takes a restart).
static GRANTS: OnceLock<Arc<Grants>> = OnceLock::new();

/// Whether `oauth.callback_url` was configured (else the listener's address is used).
static EXPLICIT: OnceLock<bool> = OnceLock::new();

/// Whether the callback URL is the listener's own (set once it is bound).
pub(crate) fn callback_is_default() -> bool {
    !EXPLICIT.get().copied().unwrap_or(false)
}

/// The users' consents, when `[vault]` was configured.
pub(crate) fn grants() -> Option<Arc<Grants>> {
    GRANTS.get().cloned()
}

impl RawVault {
    /// The vault's location and keys; `session_keys` are `session.seal_keys`.
    pub(super) fn validate(&self, session_keys: &[RawSealKey]) -> anyhow::Result<Vault> {
        let url = match (&self.postgres_url, &self.postgres_url_env) {
            (Some(_), Some(_)) => bail!("vault: give postgres_url or postgres_url_env, not both"),
            (Some(u), None) => Some(u.clone()),
            (None, Some(var)) => Some(
                std::env::var(var)
                    .with_context(|| format!("vault.postgres_url_env: {var} is not set"))?,
            ),
            (None, None) => None,
        };
        let location = match (&self.path, url) {
            (Some(_), Some(_)) => bail!("vault: give path (SQLite) or a PostgreSQL URL, not both"),
            (Some(p), None) => Location::Sqlite(p.clone()),
            (None, Some(u)) if u.starts_with("postgres://") || u.starts_with("postgresql://") => {
                Location::Postgres(u)
            }
            (None, Some(_)) => bail!("vault: the PostgreSQL URL must start with postgres://"),
            (None, None) => bail!("vault: give path (a SQLite file) or postgres_url"),
        };
        let keys = if self.keys.is_empty() {
            session_keys
        } else {
            &self.keys
        };
        let keys = seal_keys(keys, "vault.keys")?
            .context("vault: give keys (or session.seal_keys): the vault seals what it holds")?;
        Ok(Vault {
            location,
            keys: Arc::new(keys),
        })
    }
}

impl RawOAuthSection {
    /// The process's consents, made the first time with this callback URL (without
    /// one, the listener's own, set once it is bound).
    pub(super) fn grants(&self, listen: &str) -> anyhow::Result<Arc<Grants>> {
        let url = self
            .callback_url
            .clone()
            .unwrap_or_else(|| format!("http://{listen}/oauth/callback"));
        check::url("oauth.callback_url", &url)?;
        EXPLICIT.get_or_init(|| self.callback_url.is_some());
        let ttl = self.consent_ttl.unwrap_or(Duration::from_secs(600));
        if ttl < Duration::from_secs(10) {
            bail!("oauth.consent_ttl must be at least 10s");
        }
        let grants = GRANTS.get_or_init(|| Grants::new(url.clone(), ttl));
        if self.callback_url.is_some() && *grants.redirect_uri() != url {
            tracing::warn!("oauth.callback_url changed: it takes effect at the next start");
        }
        Ok(grants.clone())
    }
}
