//! # mcpgate-admin
//!
//! The operator's view of a running gateway, on its own listener (loopback by default)
//! behind its own token: the admin API (list sessions, end one through the normal
//! teardown path, show the effective configuration with secrets redacted) and a
//! self-contained live dashboard served by the binary itself.

use mcpgate_session::SessionTable;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// What the admin listener needs besides the session table.
#[derive(Debug, Clone)]
pub struct AdminConfig {
    /// The bearer token every admin request must carry.
    pub token: String,
    /// The effective configuration, secrets already redacted.
    pub redacted_config: serde_json::Value,
}

/// Serves the admin API and dashboard on `listener` until `shutdown` is cancelled.
pub async fn serve(
    listener: TcpListener,
    table: SessionTable,
    cfg: AdminConfig,
    shutdown: CancellationToken,
) {
    let _ = (listener, table, cfg);
    shutdown.cancelled().await;
}
