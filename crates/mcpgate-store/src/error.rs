//! [`StoreError`]: why the store could not do what it was asked. It names the backend
//! and what failed, never a value it holds.

use std::sync::Arc;

/// A failure of the store.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    /// The SQLite file could not be opened or used (missing directory, not writable, not
    /// a database, locked).
    #[error("vault file {path}: {source}")]
    Sqlite {
        /// The file.
        path: String,
        /// What SQLite said.
        source: Arc<rusqlite::Error>,
    },
    /// The PostgreSQL server could not be reached or refused the statement.
    #[error("vault database: {0}")]
    Postgres(#[source] Arc<tokio_postgres::Error>),
    /// A migration failed; nothing of it was applied.
    #[error("vault migration {version}: {source}")]
    Migration {
        /// The migration's version.
        version: u32,
        /// Why.
        source: Box<StoreError>,
    },
    /// The database was migrated by a newer gateway than this one.
    #[error("the vault's schema is version {found}, newer than this gateway's {known}")]
    Newer {
        /// The schema version found.
        found: u32,
        /// The newest this gateway knows.
        known: u32,
    },
    /// A sealed value does not open with the key ring (a key was removed, or the row
    /// was tampered with or moved).
    #[error("a vault entry ({kind}) does not open with the configured keys: {source}")]
    Sealed {
        /// The entry's kind.
        kind: String,
        /// Why.
        source: mcpgate_seal::SealError,
    },
    /// The database did not accept a connection in time.
    #[error("vault database: no connection within {0:?}")]
    Unreachable(std::time::Duration),
    /// The vault was not opened (yet): nothing can be read or kept.
    #[error("the token vault is not open")]
    NotOpen,
    /// The blocking task that ran a SQLite statement did not finish.
    #[error("vault worker failed")]
    Worker,
}

impl StoreError {
    pub(crate) fn sqlite(path: &str, e: rusqlite::Error) -> Self {
        StoreError::Sqlite {
            path: path.to_owned(),
            source: Arc::new(e),
        }
    }
}

impl From<tokio_postgres::Error> for StoreError {
    fn from(e: tokio_postgres::Error) -> Self {
        StoreError::Postgres(Arc::new(e))
    }
}
