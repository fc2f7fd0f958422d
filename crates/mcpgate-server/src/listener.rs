//! The accept loop, TLS, connection limits and graceful shutdown.

use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{debug, info, warn};

use crate::conn::Slot;
use crate::front::Front;

/// Serves `front` on `listener` until `shutdown` is cancelled; then drains: `/readyz`
/// turns 503 and new sessions are refused (503) while the listener keeps serving, so
/// in-flight requests and a load balancer's probes still get answers; once in-flight
/// requests finish (or the drain deadline passes) every session is closed through the
/// teardown path, the listener stops, and open connections get a bounded time to finish.
pub async fn serve(listener: TcpListener, front: Arc<Front>, shutdown: CancellationToken) {
    let conns = Conns {
        tracker: TaskTracker::new(),
        stop: CancellationToken::new(),
    };
    let stop_accepting = CancellationToken::new();
    let accepting = tokio::spawn(accept_loop(
        listener,
        front.clone(),
        conns.clone(),
        stop_accepting.clone(),
    ));
    let tls_watch = front
        .cfg
        .tls
        .clone()
        .map(|tls| tokio::spawn(tls.watch(stop_accepting.clone())));
    let sweeping = tokio::spawn(sweep_limiter(front.clone(), stop_accepting.clone()));
    shutdown.cancelled().await;
    info!(sessions = front.table.len(), drain = ?front.cfg.drain, "draining: readiness off, new sessions refused");
    // New sessions are refused from here on; in-flight requests of both eras get up to
    // the drain to finish; then listen streams end and every session closes.
    front.table.stop_accepting();
    let until = tokio::time::Instant::now() + front.cfg.drain;
    while tokio::time::Instant::now() < until
        && (front.table.inflight() > 0 || front.inflight.draining() > 0)
    {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    front.closing.cancel();
    front.table.shutdown(std::time::Duration::ZERO).await;
    stop_accepting.cancel();
    let _ = accepting.await;
    let _ = sweeping.await;
    if let Some(t) = tls_watch {
        let _ = t.await;
    }
    // Idle connections close at once, busy ones after their answer.
    conns.stop.cancel();
    conns.tracker.close();
    if tokio::time::timeout(std::time::Duration::from_secs(5), conns.tracker.wait())
        .await
        .is_err()
    {
        warn!("some connections did not close in time");
    }
    info!("shutdown complete");
}

/// Every 10 s, forgets rate-limit state of keys (principals, addresses) that have not been
/// seen for a while — off the request path, which never counts the limiter's keys.
async fn sweep_limiter(front: Arc<Front>, stop: CancellationToken) {
    let mut every = tokio::time::interval(std::time::Duration::from_secs(10));
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = every.tick() => {
                // The limiter of the configuration serving now (a reload may replace it).
                let live = front.live.load();
                if let Some(limiter) = &live.limiter {
                    limiter.retain_recent();
                    limiter.shrink_to_fit();
                }
            }
        }
    }
}

/// The open connections' tasks, and what tells them the drain has come.
#[derive(Clone)]
struct Conns {
    tracker: TaskTracker,
    stop: CancellationToken,
}

async fn accept_loop(
    listener: TcpListener,
    front: Arc<Front>,
    conns: Conns,
    stop: CancellationToken,
) {
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
        let slot = match front.conns.admit(peer.ip()) {
            Ok(s) => s,
            Err(reason) => {
                front.conns.refused(reason);
                debug!(%peer, reason, "connection refused: too many connections");
                refuse(stream);
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let front = front.clone();
        let drain = conns.stop.clone();
        conns.tracker.spawn(async move {
            match &front.cfg.tls {
                None => serve_connection(stream, peer, slot, &front, &drain).await,
                Some(tls) => match tls.accept(stream, front.cfg.header_timeout).await {
                    Ok(s) => serve_connection(s, peer, slot, &front, &drain).await,
                    Err(e) => {
                        front.conns.refused("tls");
                        info!(%peer, error = %e, "TLS connection refused");
                    }
                },
            }
        });
    }
}

/// Answers a connection that got no slot with `503` (best effort, never waiting) and
/// closes it.
fn refuse(stream: TcpStream) {
    const BODY: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain\r\ncontent-length: 28\r\nretry-after: 1\r\nconnection: close\r\n\r\ntoo many connections; retry\n";
    let _ = stream.try_write(BODY);
}

async fn serve_connection<I>(
    io: I,
    peer: std::net::SocketAddr,
    slot: Slot,
    front: &Arc<Front>,
    drain: &CancellationToken,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send,
{
    let info = crate::front::Conn {
        peer,
        reserve: slot.is_reserve(),
    };
    crate::h1::Connection::new(io, info)
        .serve(front, drain)
        .await;
    drop(slot);
}
