//! # mcpgate-admin
//!
//! The operator's view of a running gateway, on its own listener (loopback by default)
//! behind its own token: the admin API (list sessions, end one through the normal
//! teardown path, show the effective configuration with secrets redacted, recent time
//! series) and a self-contained live dashboard served by the binary itself.
//!
//! ## Endpoints
//!
//! | method | path | auth | what |
//! |---|---|---|---|
//! | GET | `/` | no | the dashboard (one HTML page; it asks for the token) |
//! | GET | `/healthz` | no | 200 while serving |
//! | GET | `/api/sessions` | bearer | live sessions (id prefixes only, never full ids) |
//! | DELETE | `/api/sessions/{prefix}` | bearer | ends the one session with that id prefix |
//! | GET | `/api/config` | bearer | the effective configuration, secrets redacted |
//! | GET | `/api/servers` | bearer | each server's protocol era (configured or learned) and its pooled stdio children |
//! | GET | `/api/stats` | bearer | per-second samples of the last five minutes |
//! | GET | `/api/grants` | bearer | users' upstream OAuth grants in the vault (who, which server, scope, when; never a token) |
//! | DELETE | `/api/grants/{server}/{principal}` | bearer | revokes one (the user consents again) |
//!
//! Every `/api/` request needs `Authorization: Bearer <token>`, compared in constant
//! time; without it, or with a wrong one, the answer is 401 with `WWW-Authenticate`.
//!
//! ## Layout
//! - `server.rs`: the accept loop and graceful shutdown.
//! - `api.rs`: routing, the handlers, the session summary.
//! - `grants.rs`: the vault's upstream grants, listed and revoked.
//! - `auth.rs`: bearer-token check.
//! - `stats.rs`: the sampler task and its ring of samples.
//! - `dashboard.html`: the page (inline CSS and JS, no external resources).

mod api;
mod auth;
mod config;
mod grants;
mod server;
mod stats;

pub use config::AdminConfig;
use mcpgate_session::SessionTable;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// Serves the admin API and dashboard on `listener` until `shutdown` is cancelled.
///
/// Also runs the stats sampler (one sample per second, five minutes kept), which stops
/// with `shutdown` too. Returns once the listener is closed, open connections have
/// finished (bounded) and the sampler has stopped.
pub async fn serve(
    listener: TcpListener,
    table: SessionTable,
    cfg: AdminConfig,
    shutdown: CancellationToken,
) {
    server::serve(listener, table, cfg, shutdown).await;
}
