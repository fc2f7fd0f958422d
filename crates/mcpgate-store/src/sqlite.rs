//! The SQLite backend: one file, WAL, one connection used from blocking tasks (the lock
//! is held only inside them, never across an `.await`).

use std::path::Path;
use std::sync::{Arc, Mutex};

use rusqlite::{Connection, OptionalExtension, params};

use crate::error::StoreError;
use crate::schema::{self, ListedRow, Row};

/// A SQLite vault file.
#[derive(Debug, Clone)]
pub(crate) struct Sqlite {
    conn: Arc<Mutex<Connection>>,
    path: Arc<str>,
}

impl Sqlite {
    /// Opens (creating) the file at `path` and brings its schema up to date.
    pub(crate) fn open(path: &Path) -> Result<Self, StoreError> {
        let shown = path.display().to_string();
        let err = |e| StoreError::sqlite(&shown, e);
        let mut conn = Connection::open(path).map_err(err)?;
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(err)?;
        // A file that is not a database fails here, before anything is written.
        let mode: String = conn
            .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
            .map_err(err)?;
        if !mode.eq_ignore_ascii_case("wal") {
            tracing::warn!(path = %shown, mode, "the vault file cannot use WAL; continuing");
        }
        migrate(&mut conn, &shown)?;
        Ok(Sqlite {
            conn: Arc::new(Mutex::new(conn)),
            path: Arc::from(shown),
        })
    }

    /// Runs `f` on the connection in a blocking task.
    async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> Result<T, StoreError> {
        let (conn, path) = (self.conn.clone(), self.path.clone());
        tokio::task::spawn_blocking(move || {
            let conn = conn.lock().map_err(|_| StoreError::Worker)?;
            f(&conn).map_err(|e| StoreError::sqlite(&path, e))
        })
        .await
        .map_err(|_| StoreError::Worker)?
    }

    pub(crate) async fn get(
        &self,
        kind: &str,
        key: &str,
        now: i64,
    ) -> Result<Option<Row>, StoreError> {
        let (kind, key) = (kind.to_owned(), key.to_owned());
        self.run(move |c| {
            c.query_row(schema::GET, params![kind, key, now], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
            })
            .optional()
        })
        .await
    }

    pub(crate) async fn put(
        &self,
        kind: &str,
        key: &str,
        (sealed, meta, expires_at, now): (String, String, Option<i64>, i64),
    ) -> Result<(), StoreError> {
        let (kind, key) = (kind.to_owned(), key.to_owned());
        self.run(move |c| {
            c.execute(
                schema::PUT,
                params![kind, key, sealed, meta, expires_at, now],
            )
            .map(drop)
        })
        .await
    }

    pub(crate) async fn take(&self, kind: &str, key: &str) -> Result<Option<Row>, StoreError> {
        let (kind, key) = (kind.to_owned(), key.to_owned());
        self.run(move |c| {
            c.query_row(schema::TAKE, params![kind, key], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
            })
            .optional()
        })
        .await
    }

    pub(crate) async fn delete(&self, kind: &str, key: &str) -> Result<bool, StoreError> {
        let (kind, key) = (kind.to_owned(), key.to_owned());
        self.run(move |c| c.execute(schema::DELETE, params![kind, key]).map(|n| n > 0))
            .await
    }

    pub(crate) async fn list(&self, kind: &str, now: i64) -> Result<Vec<ListedRow>, StoreError> {
        let kind = kind.to_owned();
        self.run(move |c| {
            let mut st = c.prepare(schema::LIST)?;
            let rows = st.query_map(params![kind, now], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
            })?;
            rows.collect()
        })
        .await
    }

    pub(crate) async fn purge(&self, now: i64) -> Result<u64, StoreError> {
        self.run(move |c| c.execute(schema::PURGE, params![now]).map(|n| n as u64))
            .await
    }
}

/// Applies the migrations the file has not had, each in a transaction.
fn migrate(conn: &mut Connection, path: &str) -> Result<(), StoreError> {
    let err = |e| StoreError::sqlite(path, e);
    conn.execute(schema::SCHEMA_TABLE, []).map_err(err)?;
    let applied: Option<u32> = conn
        .query_row(schema::APPLIED, [], |r| r.get(0))
        .map_err(err)?;
    let applied = applied.unwrap_or(0);
    if applied > schema::newest() {
        return Err(StoreError::Newer {
            found: applied,
            known: schema::newest(),
        });
    }
    for (version, sql) in schema::MIGRATIONS.iter().filter(|(v, _)| *v > applied) {
        let failed = |e| StoreError::Migration {
            version: *version,
            source: Box::new(StoreError::sqlite(path, e)),
        };
        let tx = conn.transaction().map_err(failed)?;
        tx.execute_batch(sql).map_err(failed)?;
        tx.execute(schema::RECORD, params![version, schema::now()])
            .map_err(failed)?;
        tx.commit().map_err(failed)?;
    }
    Ok(())
}
