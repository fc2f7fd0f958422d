//! The accept loop and graceful shutdown.

use std::sync::Arc;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::Front;

/// Serves `front` on `listener` until `shutdown` is cancelled; then stops accepting,
/// drains and closes every session through the teardown path, and lets open
/// connections finish (bounded).
pub async fn serve(listener: TcpListener, front: Arc<Front>, shutdown: CancellationToken) {
    let graceful = GracefulShutdown::new();
    let mut builder = http1::Builder::new();
    builder
        .keep_alive(true)
        .timer(TokioTimer::new())
        .header_read_timeout(front.cfg.header_timeout);
    loop {
        let (stream, peer) = tokio::select! {
            () = shutdown.cancelled() => break,
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    // EMFILE and friends: keep serving the connections we have.
                    warn!(error = %e, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let front = front.clone();
        let svc = service_fn(move |req| {
            let front = front.clone();
            async move { Ok::<_, std::convert::Infallible>(front.handle(req).await) }
        });
        let conn = graceful.watch(builder.serve_connection(TokioIo::new(stream), svc));
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                debug!(%peer, error = %e, "connection ended with an error");
            }
        });
    }
    drop(listener);
    info!(
        sessions = front.table.len(),
        "shutting down: draining sessions"
    );
    front.table.shutdown(front.cfg.drain).await;
    if tokio::time::timeout(std::time::Duration::from_secs(5), graceful.shutdown())
        .await
        .is_err()
    {
        warn!("some connections did not close in time");
    }
    info!("shutdown complete");
}
