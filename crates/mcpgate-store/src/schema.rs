//! The store's schema, as versioned migrations both backends apply in order (the SQL is
//! the subset SQLite and PostgreSQL share), and the statements both run.
//!
//! Placeholders are `$1`, `$2`, … in order of first use: PostgreSQL's own, and for SQLite
//! named parameters whose index is their order of appearance.

/// Seconds since the epoch.
pub(crate) fn now() -> i64 {
    use std::time::{Duration, SystemTime, UNIX_EPOCH};
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_secs() as i64
}

/// The migrations: `(version, statements)`, applied once each, in order, each in a
/// transaction with its record in `mcpgate_schema`.
pub(crate) const MIGRATIONS: &[(u32, &str)] = &[(
    1,
    "CREATE TABLE vault (
        kind TEXT NOT NULL,
        key TEXT NOT NULL,
        sealed TEXT NOT NULL,
        meta TEXT NOT NULL,
        expires_at BIGINT,
        updated_at BIGINT NOT NULL,
        PRIMARY KEY (kind, key)
    )",
)];

/// The newest schema version this gateway knows.
pub(crate) fn newest() -> u32 {
    MIGRATIONS.last().map_or(0, |(v, _)| *v)
}

/// The table of applied migrations.
pub(crate) const SCHEMA_TABLE: &str = "CREATE TABLE IF NOT EXISTS mcpgate_schema (
    version INTEGER PRIMARY KEY,
    applied_at BIGINT NOT NULL
)";

/// The newest applied version (`NULL` when none).
pub(crate) const APPLIED: &str = "SELECT MAX(version) FROM mcpgate_schema";

/// Records that a version was applied.
pub(crate) const RECORD: &str = "INSERT INTO mcpgate_schema (version, applied_at) VALUES ($1, $2)";

/// One entry, unless it expired: `(kind, key, now)`.
pub(crate) const GET: &str = "SELECT sealed, meta, expires_at, updated_at FROM vault
    WHERE kind = $1 AND key = $2 AND (expires_at IS NULL OR expires_at > $3)";

/// Writes an entry: `(kind, key, sealed, meta, expires_at, updated_at)`.
pub(crate) const PUT: &str = "INSERT INTO vault (kind, key, sealed, meta, expires_at, updated_at)
    VALUES ($1, $2, $3, $4, $5, $6)
    ON CONFLICT (kind, key) DO UPDATE SET sealed = excluded.sealed, meta = excluded.meta,
        expires_at = excluded.expires_at, updated_at = excluded.updated_at";

/// Removes an entry and returns it (at most one caller gets it): `(kind, key)`.
pub(crate) const TAKE: &str = "DELETE FROM vault WHERE kind = $1 AND key = $2
    RETURNING sealed, meta, expires_at, updated_at";

/// Removes an entry: `(kind, key)`.
pub(crate) const DELETE: &str = "DELETE FROM vault WHERE kind = $1 AND key = $2";

/// Every live entry of a kind, without its sealed value: `(kind, now)`.
pub(crate) const LIST: &str = "SELECT key, meta, expires_at, updated_at FROM vault
    WHERE kind = $1 AND (expires_at IS NULL OR expires_at > $2) ORDER BY key";

/// Removes what expired: `(now)`.
pub(crate) const PURGE: &str =
    "DELETE FROM vault WHERE expires_at IS NOT NULL AND expires_at <= $1";

/// A row as read: sealed value, meta (JSON text), expiry, last write.
pub(crate) type Row = (String, String, Option<i64>, i64);

/// A listed row: key, meta (JSON text), expiry, last write.
pub(crate) type ListedRow = (String, String, Option<i64>, i64);
