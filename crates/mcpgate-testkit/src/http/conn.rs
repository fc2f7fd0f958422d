//! Accepting connections and serving HTTP/1.1 on each (over TLS when configured), until
//! the server shuts down.

use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

use super::State;
use crate::stats::bump;

/// Accepts connections until shutdown; each is served in its own task.
pub(super) async fn accept_loop(listener: TcpListener, state: Arc<State>) {
    loop {
        let accepted = tokio::select! {
            () = state.shutdown.cancelled() => return,
            r = listener.accept() => r,
        };
        match accepted {
            Ok((stream, _peer)) => {
                let conn = serve_connection(stream, Arc::clone(&state));
                state.tasks.spawn(conn);
            }
            // Out of file descriptors or similar: back off briefly, keep serving.
            Err(_) => tokio::time::sleep(Duration::from_millis(5)).await,
        }
    }
}

async fn serve_connection(stream: TcpStream, state: Arc<State>) {
    // Best effort: a socket option that fails to set changes timing only.
    let _ = stream.set_nodelay(true);
    if state.opts.reset_on_delete {
        // Closing with zero linger sends RST instead of FIN.
        let _ = stream.set_zero_linger();
    }
    let shutdown = state.shutdown.clone();
    match state.opts.tls.clone() {
        None => serve_io(stream, state, shutdown).await,
        Some(tls) => {
            let accept = tokio_rustls::TlsAcceptor::from(tls).accept(stream);
            let tls_stream = tokio::select! {
                s = accept => s,
                () = shutdown.cancelled() => return,
            };
            match tls_stream {
                Ok(s) => {
                    bump(&state.stats.tls_connections);
                    serve_io(s, state, shutdown).await;
                }
                Err(_) => bump(&state.stats.tls_handshake_failures),
            }
        }
    }
}

async fn serve_io<I>(io: I, state: Arc<State>, shutdown: CancellationToken)
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let idle_close = state.opts.idle_close;
    let stats = Arc::clone(&state);
    let service = service_fn(move |req| {
        let state = Arc::clone(&state);
        async move { state.route(req).await }
    });
    let mut builder = http1::Builder::new();
    builder.keep_alive(true);
    if let Some(idle) = idle_close {
        // hyper's head timeout also runs while a keep-alive connection waits for its
        // next request: that is the idle close.
        builder
            .timer(hyper_util::rt::TokioTimer::new())
            .header_read_timeout(idle);
    }
    let conn = builder.serve_connection(TokioIo::new(io), service);
    tokio::select! {
        // Errors here are the client going away, an on-purpose abort, or the idle close.
        r = conn => {
            if r.is_err_and(|e| e.is_timeout()) {
                bump(&stats.stats.idle_closed);
            }
        }
        () = shutdown.cancelled() => {}
    }
}
