//! # mcpgate-store
//!
//! The gateway's state that outlives a process, and nothing else: entries of a kind
//! (upstream grants per principal × server, consents in progress, registered clients),
//! each a sealed value — encrypted and authenticated with the key ring of sealed session
//! ids (`mcpgate-seal`), bound to its kind and key so a row moved elsewhere does not open
//! — beside metadata that may be shown (never a secret) and an optional expiry.
//!
//! Two backends behind one [`Store`]: **SQLite** (the default: one file, WAL, embedded)
//! and **PostgreSQL** (replicas share it). The schema is versioned (`schema.rs`) and
//! migrated at start. Sessions themselves never touch the store: what the request path
//! needs from it is cached above it.
//!
//! ## Layout
//! - `schema.rs`: migrations and the statements both backends run.
//! - `sqlite.rs`, `postgres.rs`: the backends.
//! - `error.rs`: [`StoreError`].

mod error;
mod postgres;
mod schema;
mod sqlite;

use std::path::PathBuf;
use std::sync::Arc;

pub use error::StoreError;
use mcpgate_seal::KeyRing;
use schema::now;

/// Where the store is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// A SQLite file (created when missing).
    Sqlite(PathBuf),
    /// A PostgreSQL database (`postgres://user:password@host/db`).
    Postgres(String),
}

/// An entry as read: its opened value, metadata, expiry and last write (seconds since
/// the epoch).
#[derive(Clone, PartialEq, Eq)]
pub struct Entry {
    /// The value, opened.
    pub value: Vec<u8>,
    /// What may be shown of it.
    pub meta: serde_json::Value,
    /// When it expires (`None`: never).
    pub expires_at: Option<i64>,
    /// When it was last written.
    pub updated_at: i64,
}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entry")
            .field("meta", &self.meta)
            .field("expires_at", &self.expires_at)
            .finish_non_exhaustive()
    }
}

/// An entry as listed: its key and what may be shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// Its key.
    pub key: String,
    /// What may be shown of it.
    pub meta: serde_json::Value,
    /// When it expires.
    pub expires_at: Option<i64>,
    /// When it was last written.
    pub updated_at: i64,
}

#[derive(Debug)]
enum Backend {
    Sqlite(sqlite::Sqlite),
    Postgres(postgres::Postgres),
}

/// The store.
#[derive(Debug, Clone)]
pub struct Store {
    backend: Arc<Backend>,
    keys: Arc<KeyRing>,
    /// Where it is, for logs (no password).
    shown: Arc<str>,
}

/// What a value is sealed to: its kind and key.
fn context(kind: &str, key: &str) -> Vec<u8> {
    let mut c = Vec::with_capacity(kind.len() + key.len() + 1);
    c.extend_from_slice(kind.as_bytes());
    c.push(0);
    c.extend_from_slice(key.as_bytes());
    c
}

impl Store {
    /// Opens the store at `at` (creating and migrating it), sealing with `keys`.
    pub async fn open(at: &Location, keys: Arc<KeyRing>) -> Result<Self, StoreError> {
        let (backend, shown) = match at {
            Location::Sqlite(path) => {
                let path = path.clone();
                let shown = path.display().to_string();
                let db = tokio::task::spawn_blocking(move || sqlite::Sqlite::open(&path))
                    .await
                    .map_err(|_| StoreError::Worker)??;
                (Backend::Sqlite(db), shown)
            }
            Location::Postgres(url) => (
                Backend::Postgres(postgres::Postgres::open(url).await?),
                without_password(url),
            ),
        };
        Ok(Store {
            backend: Arc::new(backend),
            keys,
            shown: Arc::from(shown),
        })
    }

    /// Where the store is (a database URL without its password).
    pub fn location(&self) -> &str {
        &self.shown
    }

    /// The entry `key` of `kind`, unless it expired.
    pub async fn get(&self, kind: &str, key: &str) -> Result<Option<Entry>, StoreError> {
        let row = match &*self.backend {
            Backend::Sqlite(b) => b.get(kind, key, now()).await?,
            Backend::Postgres(b) => b.get(kind, key, now()).await?,
        };
        row.map(|r| self.open_row(kind, key, r)).transpose()
    }

    /// Writes the entry `key` of `kind` (replacing one there): `value` sealed, `meta` as
    /// it is (never put a secret in it).
    pub async fn put(
        &self,
        kind: &str,
        key: &str,
        value: &[u8],
        meta: &serde_json::Value,
        expires_at: Option<i64>,
    ) -> Result<(), StoreError> {
        let sealed = self
            .keys
            .seal_bytes(&context(kind, key), value)
            .map_err(|source| StoreError::Sealed {
                kind: kind.to_owned(),
                source,
            })?;
        let row = (sealed, meta.to_string(), expires_at, now());
        match &*self.backend {
            Backend::Sqlite(b) => b.put(kind, key, row).await,
            Backend::Postgres(b) => b.put(kind, key, row).await,
        }
    }

    /// Removes the entry and returns it, if it was there and had not expired: of callers
    /// racing for it (on any replica), one gets it.
    pub async fn take(&self, kind: &str, key: &str) -> Result<Option<Entry>, StoreError> {
        let row = match &*self.backend {
            Backend::Sqlite(b) => b.take(kind, key).await?,
            Backend::Postgres(b) => b.take(kind, key).await?,
        };
        let row = row.filter(|(_, _, exp, _)| exp.is_none_or(|e| e > now()));
        row.map(|r| self.open_row(kind, key, r)).transpose()
    }

    /// Removes the entry; whether it was there.
    pub async fn delete(&self, kind: &str, key: &str) -> Result<bool, StoreError> {
        match &*self.backend {
            Backend::Sqlite(b) => b.delete(kind, key).await,
            Backend::Postgres(b) => b.delete(kind, key).await,
        }
    }

    /// Every live entry of `kind`, without values.
    pub async fn list(&self, kind: &str) -> Result<Vec<Listed>, StoreError> {
        let rows = match &*self.backend {
            Backend::Sqlite(b) => b.list(kind, now()).await?,
            Backend::Postgres(b) => b.list(kind, now()).await?,
        };
        Ok(rows
            .into_iter()
            .map(|(key, meta, expires_at, updated_at)| Listed {
                key,
                meta: serde_json::from_str(&meta).unwrap_or_default(),
                expires_at,
                updated_at,
            })
            .collect())
    }

    /// Removes every expired entry; how many.
    pub async fn purge(&self) -> Result<u64, StoreError> {
        match &*self.backend {
            Backend::Sqlite(b) => b.purge(now()).await,
            Backend::Postgres(b) => b.purge(now()).await,
        }
    }

    fn open_row(&self, kind: &str, key: &str, row: schema::Row) -> Result<Entry, StoreError> {
        let (sealed, meta, expires_at, updated_at) = row;
        let value = self
            .keys
            .open_bytes(&context(kind, key), &sealed)
            .map_err(|source| StoreError::Sealed {
                kind: kind.to_owned(),
                source,
            })?;
        Ok(Entry {
            value,
            meta: serde_json::from_str(&meta).unwrap_or_default(),
            expires_at,
            updated_at,
        })
    }
}

/// A database URL as it may be logged: its password replaced.
fn without_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return "<database>".into();
    };
    match rest.split_once('@') {
        Some((user, host)) => {
            let user = user.split(':').next().unwrap_or("");
            format!("{scheme}://{user}:***@{host}")
        }
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests;
