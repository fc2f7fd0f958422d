//! The admin listener: accept loop, the sampler, graceful shutdown.

use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use mcpgate_session::SessionTable;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::api::{self, State};
use crate::config::AdminConfig;
use crate::stats::{self, Stats};

/// How long a client may take to send its request headers.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// How long open connections get to finish once shutdown starts.
const CLOSE_GRACE: Duration = Duration::from_secs(3);

pub(crate) async fn serve(
    listener: TcpListener,
    table: SessionTable,
    cfg: AdminConfig,
    shutdown: CancellationToken,
) {
    let tls = cfg.tls.clone();
    if let Some(tls) = &tls {
        tokio::spawn(tls.clone().watch(shutdown.clone()));
    }
    let state = Arc::new(state(table, cfg));
    let sampler = tokio::spawn(stats::run(
        state.table.clone(),
        state.stats.clone(),
        shutdown.clone(),
    ));
    let graceful = GracefulShutdown::new();
    let mut builder = http1::Builder::new();
    builder
        .keep_alive(true)
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT);
    let builder = Arc::new(builder);
    loop {
        let (stream, peer) = tokio::select! {
            () = shutdown.cancelled() => break,
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    warn!(error = %e, "admin: accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let state = state.clone();
        let svc = service_fn(move |req| {
            let state = state.clone();
            async move { Ok::<_, std::convert::Infallible>(api::handle(state, req).await) }
        });
        let watcher = graceful.watcher();
        let builder = builder.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            let result = match tls {
                None => {
                    watcher
                        .watch(builder.serve_connection(TokioIo::new(stream), svc))
                        .await
                }
                Some(tls) => match tls.accept(stream, HEADER_TIMEOUT).await {
                    Ok(s) => {
                        watcher
                            .watch(builder.serve_connection(TokioIo::new(s), svc))
                            .await
                    }
                    Err(e) => {
                        info!(%peer, error = %e, "admin: TLS connection refused");
                        return;
                    }
                },
            };
            if let Err(e) = result {
                debug!(%peer, error = %e, "admin connection ended with an error");
            }
        });
    }
    drop(listener);
    if tokio::time::timeout(CLOSE_GRACE, graceful.shutdown())
        .await
        .is_err()
    {
        warn!("admin: some connections did not close in time");
    }
    let _ = sampler.await;
    info!("admin listener stopped");
}

fn state(table: SessionTable, cfg: AdminConfig) -> State {
    let configured: Vec<String> = cfg
        .redacted_config
        .get("server")
        .and_then(|s| s.as_array())
        .map(|servers| {
            servers
                .iter()
                .filter_map(|s| s.get("name")?.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    State {
        table,
        token: cfg.token,
        config: cfg.redacted_config,
        stats: Arc::new(Stats::new(configured)),
        grants: cfg.grants,
    }
}
