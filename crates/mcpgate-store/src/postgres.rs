//! The PostgreSQL backend, for replicas that share one vault: one connection, opened
//! when first needed and again after it broke (a database that went away makes the
//! requests that need it fail with its error until it is back). Migrations run once per
//! connection under an advisory lock, so replicas starting together apply each once.

use std::sync::Arc;
use std::time::Duration;

use tokio::task::AbortHandle;
use tokio_postgres::{Client, NoTls};

use crate::error::StoreError;
use crate::schema::{self, ListedRow, Row};

/// The advisory lock that serialises migrations across replicas.
const MIGRATION_LOCK: i64 = 0x6d63_7067_6174_6531;
/// The bound on connecting.
const CONNECT: Duration = Duration::from_secs(5);

/// A live connection and the task that drives it.
#[derive(Debug)]
struct Live {
    client: Arc<Client>,
    driver: AbortHandle,
}

impl Drop for Live {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

/// A PostgreSQL vault.
#[derive(Debug)]
pub(crate) struct Postgres {
    url: String,
    live: tokio::sync::Mutex<Option<Live>>,
}

impl Postgres {
    /// A vault at `url` (`postgres://…`); connects (and migrates) now, so that a bad URL
    /// or schema is reported at start.
    pub(crate) async fn open(url: &str) -> Result<Self, StoreError> {
        let pg = Postgres {
            url: url.to_owned(),
            live: tokio::sync::Mutex::new(None),
        };
        pg.client().await?;
        Ok(pg)
    }

    /// The connection: the live one, or a new one (migrated) when there is none or it
    /// broke.
    async fn client(&self) -> Result<Arc<Client>, StoreError> {
        let mut live = self.live.lock().await;
        if let Some(l) = live.as_ref().filter(|l| !l.client.is_closed()) {
            return Ok(l.client.clone());
        }
        *live = None;
        let (mut client, conn) =
            tokio::time::timeout(CONNECT, tokio_postgres::connect(&self.url, NoTls))
                .await
                .map_err(|_| StoreError::Unreachable(CONNECT))??;
        let driver = tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::warn!(error = %e, "vault database connection ended");
            }
        })
        .abort_handle();
        migrate(&mut client).await?;
        let client = Arc::new(client);
        *live = Some(Live {
            client: client.clone(),
            driver,
        });
        Ok(client)
    }

    pub(crate) async fn get(
        &self,
        kind: &str,
        key: &str,
        now: i64,
    ) -> Result<Option<Row>, StoreError> {
        let c = self.client().await?;
        let row = c.query_opt(schema::GET, &[&kind, &key, &now]).await?;
        Ok(row.map(|r| (r.get(0), r.get(1), r.get(2), r.get(3))))
    }

    pub(crate) async fn put(
        &self,
        kind: &str,
        key: &str,
        (sealed, meta, expires_at, now): (String, String, Option<i64>, i64),
    ) -> Result<(), StoreError> {
        let c = self.client().await?;
        c.execute(
            schema::PUT,
            &[&kind, &key, &sealed, &meta, &expires_at, &now],
        )
        .await?;
        Ok(())
    }

    pub(crate) async fn take(&self, kind: &str, key: &str) -> Result<Option<Row>, StoreError> {
        let c = self.client().await?;
        let row = c.query_opt(schema::TAKE, &[&kind, &key]).await?;
        Ok(row.map(|r| (r.get(0), r.get(1), r.get(2), r.get(3))))
    }

    pub(crate) async fn delete(&self, kind: &str, key: &str) -> Result<bool, StoreError> {
        let c = self.client().await?;
        Ok(c.execute(schema::DELETE, &[&kind, &key]).await? > 0)
    }

    pub(crate) async fn list(&self, kind: &str, now: i64) -> Result<Vec<ListedRow>, StoreError> {
        let c = self.client().await?;
        let rows = c.query(schema::LIST, &[&kind, &now]).await?;
        Ok(rows
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
            .collect())
    }

    pub(crate) async fn purge(&self, now: i64) -> Result<u64, StoreError> {
        let c = self.client().await?;
        Ok(c.execute(schema::PURGE, &[&now]).await?)
    }
}

/// Applies the migrations the database has not had, each in a transaction, under the
/// advisory lock.
async fn migrate(client: &mut Client) -> Result<(), StoreError> {
    let tx = client.transaction().await?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await?;
    tx.batch_execute(schema::SCHEMA_TABLE).await?;
    let applied: Option<i32> = tx.query_one(schema::APPLIED, &[]).await?.get(0);
    let applied = u32::try_from(applied.unwrap_or(0)).unwrap_or(0);
    if applied > schema::newest() {
        return Err(StoreError::Newer {
            found: applied,
            known: schema::newest(),
        });
    }
    for (version, sql) in schema::MIGRATIONS.iter().filter(|(v, _)| *v > applied) {
        let failed = |e: tokio_postgres::Error| StoreError::Migration {
            version: *version,
            source: Box::new(e.into()),
        };
        tx.batch_execute(sql).await.map_err(failed)?;
        let v = i32::try_from(*version).unwrap_or(i32::MAX);
        tx.execute(schema::RECORD, &[&v, &schema::now()])
            .await
            .map_err(failed)?;
    }
    tx.commit().await?;
    Ok(())
}
