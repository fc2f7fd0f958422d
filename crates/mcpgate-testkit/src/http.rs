//! The Streamable HTTP transport (MCP 2025-11-25): sessions, POST/GET/DELETE
//! on one endpoint, JSON or SSE answers, event ids with replay on
//! `GET` + `Last-Event-ID` (see [`streams`]), and fault injection.
//!
//! A streamed call runs as its own task, independent of the connection that
//! asked for it: if that connection goes away (or is cut on purpose with
//! [`HttpOptions::cut_after`]), the call keeps running and its events go to
//! the stream's log, from which a resuming `GET` replays them.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use http::header::{ALLOW, CONTENT_TYPE};
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

mod modern;
mod reply;
mod streams;

use reply::{
    Body, BoxError, accepts, header_str, json, origin_ok, rpc_error, sse_response, status_only,
};
use streams::{EventStream, Live, ReaderRx, STANDALONE, Streams, parse_event_id, reader_channel};

use crate::rpc::{self, Incoming as Msg};
use crate::stats::{OpenStreamGuard, Stats, StatsCell, bump};
use crate::tools::{self, FaultHooks, McpSession, Outcome, Standalone, Subscriptions};

/// The session header (HTTP header names are case-insensitive).
const SESSION_HEADER: &str = "mcp-session-id";
/// The negotiated-version header clients send after initialization.
const VERSION_HEADER: &str = "mcp-protocol-version";
/// The header a client resumes a stream with.
const LAST_EVENT_ID: &str = "last-event-id";
/// The reconnection delay (ms) announced in a `retry:` field before a cut.
const CUT_RETRY_MS: u64 = 100;
/// How long a cut stream waits for what it sent to reach the socket before
/// the connection is aborted.
const CUT_FLUSH: Duration = Duration::from_millis(20);
/// A flood waits while its reader's connection has this many events not yet taken.
const FLOOD_WINDOW: usize = 8;

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

/// One HTTP session: its MCP state and its SSE streams.
struct HttpSession {
    mcp: McpSession,
    /// Stream `0`: what the standalone GET stream carries.
    standalone: Arc<EventStream>,
    /// The POST response streams.
    streams: Mutex<Streams>,
    /// Whether [`HttpOptions::cut_after`] may still cut a stream.
    cut_armed: Arc<AtomicBool>,
}

impl HttpSession {
    fn new(id: String, state: &State) -> Self {
        let standalone = Arc::new(EventStream::new(STANDALONE));
        let channel: Standalone = {
            let stream = Arc::clone(&standalone);
            Arc::new(move |msg: String| stream.push(&msg, false))
        };
        let hooks = Arc::new(HttpHooks {
            standalone: Arc::clone(&standalone),
            stats: Arc::clone(&state.stats),
        });
        let mcp = McpSession::new(
            id,
            Arc::clone(&state.stats),
            channel,
            Arc::clone(&state.subscriptions),
        )
        .with_hooks(hooks);
        Self {
            mcp,
            standalone,
            streams: Mutex::default(),
            cut_armed: Arc::new(AtomicBool::new(state.opts.cut_after.is_some())),
        }
    }

    /// The stream a `Last-Event-ID` names, if the session still keeps it.
    fn stream(&self, num: u64) -> Option<Arc<EventStream>> {
        if num == STANDALONE {
            Some(Arc::clone(&self.standalone))
        } else {
            lock(&self.streams).get(num)
        }
    }

    /// Ends the session: calls end unanswered, every stream's reader ends.
    fn end(&self) {
        self.mcp.end();
        self.standalone.finish();
        lock(&self.streams).finish_all();
    }
}

/// The HTTP side of the fault tools: a flood goes to the standalone (GET) stream,
/// paced by the connection reading it and never logged for replay.
struct HttpHooks {
    standalone: Arc<EventStream>,
    stats: Arc<StatsCell>,
}

impl FaultHooks for HttpHooks {
    fn flood(&self, count: u64, size: usize) -> futures::future::BoxFuture<'static, u64> {
        let stream = Arc::clone(&self.standalone);
        let stats = Arc::clone(&self.stats);
        Box::pin(async move {
            let mut sent = 0;
            for seq in 0..count {
                while stream.reader_backlog() >= FLOOD_WINDOW {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                if stream.is_finished() {
                    break;
                }
                if stream.push_unlogged(&tools::flood_notification(seq, size)) {
                    sent += 1;
                    bump(&stats.flood_sent);
                }
            }
            sent
        })
    }

    fn binary_line(&self) -> bool {
        false
    }
}

struct State {
    opts: HttpOptions,
    stats: Arc<StatsCell>,
    sessions: Mutex<HashMap<String, Arc<HttpSession>>>,
    subscriptions: Arc<Subscriptions>,
    shutdown: CancellationToken,
    tasks: TaskTracker,
}

/// A pending [`HttpOptions::cut_after`] for one POST response stream.
struct Cut {
    after: usize,
    armed: Arc<AtomicBool>,
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
        state.tasks.spawn(accept_loop(listener, Arc::clone(&state)));
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
    let service = service_fn(move |req| {
        let state = Arc::clone(&state);
        async move { state.route(req).await }
    });
    let conn = http1::Builder::new()
        .keep_alive(true)
        .serve_connection(TokioIo::new(io), service);
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
        if let Some((from, to)) = &self.opts.redirect
            && path == from
        {
            bump(&self.stats.redirected);
            let mut resp = status_only(StatusCode::TEMPORARY_REDIRECT);
            if let Ok(v) = HeaderValue::from_str(to) {
                resp.headers_mut().insert(http::header::LOCATION, v);
            }
            return Ok(resp);
        }
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
        bump(&self.stats.posts);
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
        if header_str(headers, VERSION_HEADER) == Some(modern::VERSION) {
            return match req.into_body().collect().await {
                Ok(b) => Ok(modern::answer(&b.to_bytes(), &self.stats)),
                Err(_) => Ok(status_only(StatusCode::BAD_REQUEST)),
            };
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
                let session = Arc::new(HttpSession::new(sid.clone(), &self));
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
        if method == "tools/call" && tools::tool_name(params.as_ref()) == Some("close_early") {
            return Ok(self.close_early(params.as_ref()));
        }
        if !(self.opts.always_sse || tools::streams(&method, params.as_ref())) {
            let outcome = session.mcp.handle_request(&id, &method, params, None).await;
            session.mcp.send_deferred();
            return match outcome {
                Outcome::Reply(body) => Ok(json(StatusCode::OK, body)),
                Outcome::Silent => Ok(status_only(StatusCode::ACCEPTED)),
                Outcome::Die => Err(Abort),
            };
        }
        let stream = lock(&session.streams).open();
        let (tx, rx) = reader_channel();
        let priming = stream.attach(tx, None, self.opts.priming);
        let cut = match self.opts.cut_after {
            Some(after) if method == "tools/call" => Some(Cut {
                after,
                armed: Arc::clone(&session.cut_armed),
            }),
            _ => None,
        };
        let shutdown = self.shutdown.clone();
        self.tasks
            .spawn(run_call(session, stream, id, method, params, shutdown));
        Ok(sse_response(sse_body(rx, priming, cut, None)))
    }

    /// `close_early`: an SSE answer that sends `events` notifications without event
    /// ids (so the stream cannot be resumed) and then ends cleanly, with no response.
    fn close_early(&self, params: Option<&Value>) -> Response<Body> {
        bump(&self.stats.requests);
        bump(&self.stats.closed_early);
        let events = params
            .and_then(|p| p.pointer("/arguments/events"))
            .and_then(Value::as_u64)
            .unwrap_or(1);
        let frames = async_stream::stream! {
            for seq in 0..events {
                let msg = serde_json::json!({"jsonrpc": "2.0", "method": "notifications/message",
                    "params": {"level": "info", "logger": "testkit", "data": {"close_early": seq}}});
                yield Ok::<_, BoxError>(Frame::data(Bytes::from(format!("event: message\ndata: {msg}\n\n"))));
            }
            // Let the headers and events reach the client before the stream ends.
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        sse_response(StreamBody::new(frames).boxed_unsync())
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
        let (tx, rx) = reader_channel();
        // Resume the stream the id names; an unknown id (malformed, or naming
        // a stream this session never had or no longer keeps) gets a fresh
        // standalone stream without replay.
        let resume = header_str(headers, LAST_EVENT_ID)
            .and_then(parse_event_id)
            .and_then(|(num, seq)| Some((session.stream(num)?, seq)));
        let (stream, replay_after, prime) = match resume {
            Some((stream, seq)) => {
                bump(&self.stats.resumed);
                (stream, Some(seq), false)
            }
            None => (Arc::clone(&session.standalone), None, self.opts.priming),
        };
        // Resuming the standalone stream, like a fresh GET, replaces an
        // older GET stream, which then ends.
        let guard =
            (stream.num() == STANDALONE).then(|| OpenStreamGuard::new(Arc::clone(&self.stats)));
        let priming = stream.attach(tx, replay_after, prime);
        sse_response(sse_body(rx, priming, None, guard))
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
        session.end();
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
            let msg = tools::timer_notification(session.mcp.id());
            let sent = session.standalone.push(&msg, false);
            bump(if sent {
                &stats.timer_sent
            } else {
                &stats.timer_dropped
            });
        });
    }
}

/// Runs one streamed call to its end, logging its messages and its response
/// on `stream` whether or not a connection is reading it.
async fn run_call(
    session: Arc<HttpSession>,
    stream: Arc<EventStream>,
    id: Value,
    method: String,
    params: Option<Value>,
    shutdown: CancellationToken,
) {
    let (tx, mut rx) = mpsc::unbounded_channel::<String>();
    let outcome = {
        let work = session.mcp.handle_request(&id, &method, params, Some(&tx));
        tokio::pin!(work);
        loop {
            tokio::select! {
                biased;
                () = shutdown.cancelled() => break None,
                Some(m) = rx.recv() => {
                    stream.push(&m, false);
                }
                o = &mut work => break Some(o),
            }
        }
    };
    while let Ok(m) = rx.try_recv() {
        stream.push(&m, false);
    }
    match outcome {
        Some(Outcome::Reply(body)) => {
            stream.push(&body, true);
            stream.finish();
        }
        Some(Outcome::Die) => stream.die(),
        Some(Outcome::Silent) | None => stream.finish(),
    }
    session.mcp.send_deferred();
    lock(&session.streams).retire(stream.num());
}

/// The body of an SSE response reading one stream: the priming event, if any,
/// then whatever the stream hands over until it lets go (or a cut).
fn sse_body(
    mut rx: ReaderRx,
    priming: Option<Bytes>,
    cut: Option<Cut>,
    guard: Option<OpenStreamGuard>,
) -> Body {
    let stream = async_stream::stream! {
        let _guard = guard;
        if let Some(frame) = priming {
            yield Ok::<_, BoxError>(Frame::data(frame));
        }
        let mut sent = 0usize;
        loop {
            let cut_now = cut
                .as_ref()
                .is_some_and(|c| c.after == sent && c.armed.swap(false, Ordering::Relaxed));
            if cut_now {
                yield Ok(Frame::data(Bytes::from(format!("retry: {CUT_RETRY_MS}\n\n"))));
                // Let hyper write out what was sent before the abort.
                tokio::time::sleep(CUT_FLUSH).await;
                yield Err(Box::new(Abort) as BoxError);
                break;
            }
            let Some(item) = rx.recv().await else { break };
            match item {
                Live::Event { frame, response } => {
                    yield Ok(Frame::data(frame));
                    if !response {
                        sent += 1;
                    }
                }
                Live::Die => {
                    yield Err(Box::new(Abort) as BoxError);
                    break;
                }
            }
        }
    };
    StreamBody::new(stream).boxed_unsync()
}
