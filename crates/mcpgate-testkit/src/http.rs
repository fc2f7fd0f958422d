//! The Streamable HTTP transport (MCP 2025-11-25): sessions, POST/GET/DELETE
//! on one endpoint, JSON or SSE answers, event ids with replay on
//! `GET` + `Last-Event-ID` (see [`streams`]), and fault injection.
//!
//! A streamed call runs as its own task, independent of the connection that
//! asked for it: if that connection goes away (or is cut on purpose with
//! [`HttpOptions::cut_after`]), the call keeps running and its events go to
//! the stream's log, from which a resuming `GET` replays them.
//!
//! Layout: this file holds the options and the server handle; [`conn`] accepts
//! connections (TLS included) and serves HTTP/1.1 on them, [`route`] routes a request
//! (POST, GET, DELETE on the endpoint; `/stats`), [`session`] is one HTTP session with its
//! fault hooks, [`sse`] runs a streamed call and writes the SSE body of a stream,
//! [`streams`] keeps the event logs and [`reply`] builds responses; [`modern`] answers
//! 2026-07-28 requests statelessly.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use http::Response;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

mod conn;
mod modern;
mod reply;
mod route;
mod session;
mod sse;
mod streams;

use reply::Body;
use session::HttpSession;

use crate::stats::{Stats, StatsCell};
use crate::tools::Subscriptions;

type Reply = Result<Response<Body>, Abort>;

/// Options for [`HttpServer::start`].
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// Send a standalone timer notification this long after each `initialize`.
    pub timer_ms: Option<u64>,
    /// On DELETE, end the session and then reset the TCP connection instead of answering.
    pub reset_on_delete: bool,
    /// Refuse the standalone GET stream with 405.
    pub no_get: bool,
    /// Answer every request as a one-event SSE stream, never as plain JSON.
    pub always_sse: bool,
    /// The MCP endpoint path.
    pub path: String,
    /// Fault: cut one streamed `tools/call` response per session. The first
    /// such stream in a session to have sent this many events (notifications
    /// and server-to-client requests; not the priming event or the response)
    /// gets a `retry: 100` field and then has its connection aborted without
    /// the response. The call keeps running; its later events and its
    /// response go to the stream's log, for a `GET` with `Last-Event-ID` to
    /// resume. `Some(0)` cuts the session's first streamed call right away.
    /// Later streams of the session, and resumed ones, are never cut.
    pub cut_after: Option<usize>,
    /// Start every new SSE stream (POST response or fresh GET) with a priming
    /// event: an id and empty data. Resumed streams are not primed.
    pub priming: bool,
    /// Serve HTTPS with this configuration (see [`crate::tls_config`]).
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// Answer every request for the first path with `307` to the second (a URL or path):
    /// a server that moved its endpoint, or one that points elsewhere.
    pub redirect: Option<(String, String)>,
    /// Close a keep-alive connection that has waited this long for its next request (as
    /// Node servers do after 5 s), the way a server does: a FIN, whatever a client is
    /// about to send.
    pub idle_close: Option<std::time::Duration>,
    /// A stateless server: `initialize` is answered without `Mcp-Session-Id`, and each
    /// later request without one is served by a fresh throwaway session.
    pub stateless: bool,
}

impl Default for HttpOptions {
    fn default() -> Self {
        Self {
            timer_ms: None,
            reset_on_delete: false,
            no_get: false,
            always_sse: false,
            path: "/mcp".to_owned(),
            cut_after: None,
            priming: false,
            tls: None,
            redirect: None,
            idle_close: None,
            stateless: false,
        }
    }
}

/// Why a connection is dropped without an answer (`die` tool, `reset_on_delete`).
#[derive(Debug)]
struct Abort;

impl std::fmt::Display for Abort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("testkit aborts the connection on purpose")
    }
}

impl std::error::Error for Abort {}

/// What every connection of one server shares.
struct State {
    opts: HttpOptions,
    stats: Arc<StatsCell>,
    sessions: Mutex<HashMap<String, Arc<HttpSession>>>,
    subscriptions: Arc<Subscriptions>,
    shutdown: CancellationToken,
    tasks: TaskTracker,
}

/// A running Streamable HTTP MCP server on a real socket.
///
/// Dropping it stops it too (without waiting); prefer [`HttpServer::shutdown`].
pub struct HttpServer {
    addr: SocketAddr,
    state: Arc<State>,
}

impl std::fmt::Debug for HttpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpServer")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl HttpServer {
    /// Binds `addr` (e.g. `127.0.0.1:0`) and starts serving in the background.
    pub async fn start(addr: SocketAddr, opts: HttpOptions) -> std::io::Result<HttpServer> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(State {
            opts,
            stats: Arc::default(),
            sessions: Mutex::default(),
            subscriptions: Arc::default(),
            shutdown: CancellationToken::new(),
            tasks: TaskTracker::new(),
        });
        state
            .tasks
            .spawn(conn::accept_loop(listener, Arc::clone(&state)));
        Ok(HttpServer { addr, state })
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The MCP endpoint URL, e.g. `http://127.0.0.1:PORT/mcp` (`https://` with TLS).
    pub fn url(&self) -> String {
        let scheme = if self.state.opts.tls.is_some() {
            "https"
        } else {
            "http"
        };
        format!("{scheme}://{}{}", self.addr, self.state.opts.path)
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> Stats {
        self.state.stats.snapshot()
    }

    /// Stops accepting and aborts every open connection at once (like the
    /// upstream dying), then waits for all background tasks to end.
    pub async fn shutdown(self) {
        self.state.shutdown.cancel();
        self.state.tasks.close();
        self.state.tasks.wait().await;
        let sessions = std::mem::take(&mut *lock(&self.state.sessions));
        for s in sessions.values() {
            s.end();
        }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.state.shutdown.cancel();
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
