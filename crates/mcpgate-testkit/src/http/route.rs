//! Routing a request: the MCP endpoint's POST (initialize, requests answered as JSON or
//! as an SSE stream, notifications, responses), GET (the standalone stream, or a resumed
//! one) and DELETE; `/stats`; redirects.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{ALLOW, CONTENT_TYPE};
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::{Frame, Incoming};
use serde_json::Value;

use super::reply::{
    Body, BoxError, accepts, header_str, json, origin_ok, rpc_error, sse_response, status_only,
};
use super::session::HttpSession;
use super::sse::{Cut, run_call, sse_body};
use super::streams::{STANDALONE, parse_event_id, reader_channel};
use super::{Abort, Reply, State, lock, modern};
use crate::rpc::{self, Incoming as Msg};
use crate::stats::{OpenStreamGuard, bump};
use crate::tools::{self, Outcome};

/// The session header (HTTP header names are case-insensitive).
const SESSION_HEADER: &str = "mcp-session-id";
/// The negotiated-version header clients send after initialization.
const VERSION_HEADER: &str = "mcp-protocol-version";
/// The header a client resumes a stream with.
const LAST_EVENT_ID: &str = "last-event-id";

fn mint_session_id() -> Option<String> {
    let mut raw = [0u8; 16];
    getrandom::fill(&mut raw).ok()?;
    Some(raw.iter().map(|b| format!("{b:02x}")).collect())
}

impl State {
    /// Answers one request.
    pub(super) async fn route(self: Arc<Self>, req: Request<Incoming>) -> Reply {
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
            Msg::Request { id, method, params }
                if method == "initialize" && self.opts.stateless =>
            {
                let session = Arc::new(HttpSession::new("stateless".into(), &self));
                self.answer(session, id, method, params).await
            }
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
                let session = if self.opts.stateless && !parts.headers.contains_key(SESSION_HEADER)
                {
                    Arc::new(HttpSession::new("stateless".into(), &self))
                } else {
                    match self.session(&parts.headers) {
                        Ok(s) => s,
                        Err(resp) => return Ok(*resp),
                    }
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
