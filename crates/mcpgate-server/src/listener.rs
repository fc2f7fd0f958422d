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

/// Serves `front` on `listener` until `shutdown` is cancelled; then drains: `/readyz`
/// turns 503 and new sessions are refused (503) while the listener keeps serving, so
/// in-flight requests and a load balancer's probes still get answers; once in-flight
/// requests finish (or the drain deadline passes) every session is closed through the
/// teardown path, the listener stops, and open connections get a bounded time to finish.
pub async fn serve(listener: TcpListener, front: Arc<Front>, shutdown: CancellationToken) {
    let graceful = Arc::new(GracefulShutdown::new());
    let stop_accepting = CancellationToken::new();
    let accepting = tokio::spawn(accept_loop(
        listener,
        front.clone(),
        graceful.clone(),
        stop_accepting.clone(),
    ));
    shutdown.cancelled().await;
    info!(sessions = front.table.len(), drain = ?front.cfg.drain, "draining: readiness off, new sessions refused");
    front.table.shutdown(front.cfg.drain).await;
    stop_accepting.cancel();
    let _ = accepting.await;
    let graceful = Arc::try_unwrap(graceful).unwrap_or_else(|_| GracefulShutdown::new());
    if tokio::time::timeout(std::time::Duration::from_secs(5), graceful.shutdown())
        .await
        .is_err()
    {
        warn!("some connections did not close in time");
    }
    info!("shutdown complete");
}

async fn accept_loop(
    listener: TcpListener,
    front: Arc<Front>,
    graceful: Arc<GracefulShutdown>,
    stop: CancellationToken,
) {
    let mut builder = http1::Builder::new();
    builder
        .keep_alive(true)
        .timer(TokioTimer::new())
        .header_read_timeout(front.cfg.header_timeout);
    loop {
        let (stream, peer) = tokio::select! {
            () = stop.cancelled() => break,
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
        let svc = service_fn(move |mut req: hyper::Request<hyper::body::Incoming>| {
            req.extensions_mut().insert(crate::front::Peer(peer));
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
}
