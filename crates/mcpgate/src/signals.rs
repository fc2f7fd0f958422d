//! Signals: SIGTERM/SIGINT start a drain; SIGHUP re-reads the listeners' TLS files.

use tokio_util::sync::CancellationToken;
use tracing::info;

/// Resolves on SIGTERM or SIGINT.
pub(crate) async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// SIGHUP: re-read the TLS files of every listener now (they are also re-read when they
/// change). A file that does not load is refused with a log line; the old one stays.
pub(crate) async fn reload_on_sighup(
    listeners: Vec<std::sync::Arc<mcpgate_tls::ServerTls>>,
    stop: CancellationToken,
) {
    use tokio::signal::unix::{SignalKind, signal};
    let Ok(mut hup) = signal(SignalKind::hangup()) else {
        tracing::warn!("cannot install the SIGHUP handler");
        return;
    };
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            s = hup.recv() => if s.is_none() { return },
        }
        info!("SIGHUP: reloading TLS certificates");
        for l in &listeners {
            if let Err(e) = l.reload(true) {
                tracing::error!(error = %e, "TLS reload refused; still serving the previous certificate");
            }
        }
    }
}
