//! The Streamable HTTP transport (MCP 2025-11-25): sessions, POST/GET/DELETE
//! on one endpoint, JSON or SSE answers, and fault injection.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use http::header::{ALLOW, CONTENT_TYPE};
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

mod reply;

use reply::{
    Body, BoxError, accepts, header_str, json, origin_ok, rpc_error, sse_frame, sse_response,
    status_only,
};

use crate::rpc::{self, Incoming as Msg};
use crate::stats::{OpenStreamGuard, Stats, StatsCell, bump};
use crate::tools::{self, McpSession, Outcome};

/// The session header (HTTP header names are case-insensitive).
const SESSION_HEADER: &str = "mcp-session-id";
/// The negotiated-version header clients send after initialization.
const VERSION_HEADER: &str = "mcp-protocol-version";

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
}

impl Default for HttpOptions {
    fn default() -> Self {
        Self {
            timer_ms: None,
            reset_on_delete: false,
            no_get: false,
            always_sse: false,
            path: "/mcp".to_owned(),
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

/// One HTTP session: its MCP state and its standalone GET stream, if open.
struct HttpSession {
    mcp: McpSession,
    get_tx: Mutex<Option<mpsc::UnboundedSender<String>>>,
}

struct State {
    opts: HttpOptions,
    stats: Arc<StatsCell>,
    sessions: Mutex<HashMap<String, Arc<HttpSession>>>,
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
            shutdown: CancellationToken::new(),
            tasks: TaskTracker::new(),
        });
        state.tasks.spawn(accept_loop(listener, Arc::clone(&state)));
        Ok(HttpServer { addr, state })
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The MCP endpoint URL, e.g. `http://127.0.0.1:PORT/mcp`.
    pub fn url(&self) -> String {
        format!("http://{}{}", self.addr, self.state.opts.path)
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
            s.mcp.end();
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

async fn accept_loop(listener: TcpListener, state: Arc<State>) {
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
    let service = service_fn(move |req| {
        let state = Arc::clone(&state);
        async move { state.route(req).await }
    });
    let conn = http1::Builder::new()
        .keep_alive(true)
        .serve_connection(TokioIo::new(stream), service);
    tokio::select! {
        // Errors here are the client going away or an on-purpose abort.
        _ = conn => {}
        () = shutdown.cancelled() => {}
    }
}

fn mint_session_id() -> Option<String> {
    let mut raw = [0u8; 16];
    getrandom::fill(&mut raw).ok()?;
    Some(raw.iter().map(|b| format!("{b:02x}")).collect())
}

impl State {
    async fn route(self: Arc<Self>, req: Request<Incoming>) -> Reply {
        let path = req.uri().path();
        if path == self.opts.path {
            if !origin_ok(req.headers()) {
                return Ok(rpc_error(
                    StatusCode::FORBIDDEN,
                    -32000,
                    "origin not allowed",
                ));
            }
            match *req.method() {
                Method::POST => self.post(req).await,
                Method::GET => Ok(self.get(req.headers())),
                Method::DELETE => self.delete(req.headers()),
                _ => {
                    let mut resp = status_only(StatusCode::METHOD_NOT_ALLOWED);
                    resp.headers_mut()
                        .insert(ALLOW, HeaderValue::from_static("GET, POST, DELETE"));
                    Ok(resp)
                }
            }
        } else if path == "/stats" && req.method() == Method::GET {
            let body = serde_json::to_string(&self.stats.snapshot()).unwrap_or_default();
            Ok(json(StatusCode::OK, body))
        } else {
            Ok(status_only(StatusCode::NOT_FOUND))
        }
    }

    /// Finds the session a request names: 400 if it names none, 404 if unknown.
    fn session(&self, headers: &HeaderMap) -> Result<Arc<HttpSession>, Box<Response<Body>>> {
        let Some(id) = header_str(headers, SESSION_HEADER) else {
            return Err(Box::new(rpc_error(
                StatusCode::BAD_REQUEST,
                -32000,
                "Bad Request: Mcp-Session-Id header is required",
            )));
        };
        match lock(&self.sessions).get(id) {
            Some(s) => Ok(Arc::clone(s)),
            None => Err(Box::new(rpc_error(
                StatusCode::NOT_FOUND,
                -32001,
                "Session not found",
            ))),
        }
    }

    async fn post(self: Arc<Self>, req: Request<Incoming>) -> Reply {
        let headers = req.headers();
        self.stats.set_last_headers(
            headers
                .iter()
                .map(|(k, v)| {
                    let v = String::from_utf8_lossy(v.as_bytes()).into_owned();
                    (k.as_str().to_owned(), v)
                })
                .collect(),
        );
        if !(accepts(headers, "application/json") && accepts(headers, "text/event-stream")) {
            return Ok(rpc_error(
                StatusCode::NOT_ACCEPTABLE,
                -32000,
                "Not Acceptable: Accept must list application/json and text/event-stream",
            ));
        }
        let json_body = header_str(headers, CONTENT_TYPE).is_some_and(|ct| {
            ct.split(';')
                .next()
                .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"))
        });
        if !json_body {
            return Ok(rpc_error(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                -32000,
                "Unsupported Media Type: Content-Type must be application/json",
            ));
        }
        if let Some(v) = header_str(headers, VERSION_HEADER)
            && !tools::SUPPORTED_VERSIONS.contains(&v)
        {
            let msg = format!("Bad Request: unsupported MCP-Protocol-Version {v}");
            return Ok(rpc_error(StatusCode::BAD_REQUEST, -32000, &msg));
        }
        let (parts, body) = req.into_parts();
        let bytes = match body.collect().await {
            Ok(b) => b.to_bytes(),
            Err(_) => return Ok(status_only(StatusCode::BAD_REQUEST)),
        };
        let msg = match rpc::parse(&bytes) {
            Ok(m) => m,
            Err(error) => return Ok(json(StatusCode::BAD_REQUEST, error)),
        };
        match msg {
            Msg::Request { id, method, params } if method == "initialize" => {
                let Some(sid) = mint_session_id() else {
                    return Ok(status_only(StatusCode::INTERNAL_SERVER_ERROR));
                };
                let session = Arc::new(HttpSession {
                    mcp: McpSession::new(sid.clone(), Arc::clone(&self.stats)),
                    get_tx: Mutex::new(None),
                });
                lock(&self.sessions).insert(sid.clone(), Arc::clone(&session));
                bump(&self.stats.sessions_created);
                self.start_timer(&session);
                let mut resp = self.answer(session, id, method, params).await?;
                if let Ok(v) = HeaderValue::from_str(&sid) {
                    resp.headers_mut().insert(SESSION_HEADER, v);
                }
                Ok(resp)
            }
            msg => {
                let session = match self.session(&parts.headers) {
                    Ok(s) => s,
                    Err(resp) => return Ok(*resp),
                };
                match msg {
                    Msg::Request { id, method, params } => {
                        self.answer(session, id, method, params).await
                    }
                    Msg::Notification { method, params } => {
                        session.mcp.handle_notification(&method, params.as_ref());
                        Ok(status_only(StatusCode::ACCEPTED))
                    }
                    Msg::Response { id, result, error } => {
                        session.mcp.handle_response(&id, result, error);
                        Ok(status_only(StatusCode::ACCEPTED))
                    }
                }
            }
        }
    }

    /// Answers a request as JSON, or as an SSE stream carrying its related messages.
    async fn answer(
        &self,
        session: Arc<HttpSession>,
        id: Value,
        method: String,
        params: Option<Value>,
    ) -> Reply {
        if !(self.opts.always_sse || tools::streams(&method, params.as_ref())) {
            return match session.mcp.handle_request(&id, &method, params, None).await {
                Outcome::Reply(body) => Ok(json(StatusCode::OK, body)),
                Outcome::Silent => Ok(status_only(StatusCode::ACCEPTED)),
                Outcome::Die => Err(Abort),
            };
        }
        let stream = async_stream::stream! {
            let (tx, mut rx) = mpsc::unbounded_channel::<String>();
            let work = session.mcp.handle_request(&id, &method, params, Some(&tx));
            tokio::pin!(work);
            let outcome = loop {
                let step = tokio::select! {
                    biased;
                    Some(m) = rx.recv() => Err(m),
                    o = &mut work => Ok(o),
                };
                match step {
                    Err(m) => yield Ok(sse_frame(&m)),
                    Ok(o) => break o,
                }
            };
            while let Ok(m) = rx.try_recv() {
                yield Ok(sse_frame(&m));
            }
            match outcome {
                Outcome::Reply(body) => yield Ok(sse_frame(&body)),
                Outcome::Silent => {}
                Outcome::Die => yield Err(Box::new(Abort) as BoxError),
            }
        };
        Ok(sse_response(StreamBody::new(stream).boxed_unsync()))
    }

    fn get(&self, headers: &HeaderMap) -> Response<Body> {
        if self.opts.no_get {
            let mut resp = status_only(StatusCode::METHOD_NOT_ALLOWED);
            resp.headers_mut()
                .insert(ALLOW, HeaderValue::from_static("POST, DELETE"));
            return resp;
        }
        if !accepts(headers, "text/event-stream") {
            return rpc_error(
                StatusCode::NOT_ACCEPTABLE,
                -32000,
                "Not Acceptable: Accept must list text/event-stream",
            );
        }
        let session = match self.session(headers) {
            Ok(s) => s,
            Err(resp) => return *resp,
        };
        let (tx, mut rx) = mpsc::unbounded_channel::<String>();
        // A new GET stream replaces an older one, which then ends.
        *lock(&session.get_tx) = Some(tx);
        let guard = OpenStreamGuard::new(Arc::clone(&self.stats));
        let stream = async_stream::stream! {
            let _guard = guard;
            while let Some(m) = rx.recv().await {
                yield Ok::<_, BoxError>(sse_frame(&m));
            }
        };
        sse_response(StreamBody::new(stream).boxed_unsync())
    }

    fn delete(&self, headers: &HeaderMap) -> Reply {
        let session = match self.session(headers) {
            Ok(s) => s,
            Err(resp) => return Ok(*resp),
        };
        if lock(&self.sessions).remove(session.mcp.id()).is_none() {
            // A concurrent DELETE won the race.
            return Ok(rpc_error(
                StatusCode::NOT_FOUND,
                -32001,
                "Session not found",
            ));
        }
        bump(&self.stats.sessions_deleted);
        session.mcp.end();
        lock(&session.get_tx).take();
        if self.opts.reset_on_delete {
            return Err(Abort);
        }
        Ok(status_only(StatusCode::OK))
    }

    fn start_timer(&self, session: &Arc<HttpSession>) {
        let Some(ms) = self.opts.timer_ms else {
            return;
        };
        let session = Arc::clone(session);
        let stats = Arc::clone(&self.stats);
        let shutdown = self.shutdown.clone();
        self.tasks.spawn(async move {
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(Duration::from_millis(ms)) => {}
            }
            let tx = lock(&session.get_tx).clone();
            let msg = tools::timer_notification(session.mcp.id());
            let sent = tx.is_some_and(|tx| tx.send(msg).is_ok());
            bump(if sent {
                &stats.timer_sent
            } else {
                &stats.timer_dropped
            });
        });
    }
}
