//! The legacy HTTP+SSE front (protocol 2024-11-05): `GET /sse` opens a session and its one
//! stream, whose first event (`endpoint`) names the URL the client POSTs messages to;
//! every answer goes out on that stream. Same session table, same teardown path: the
//! stream is the session, so when it drops, the session ends.

use std::sync::Arc;

use crate::body::ReqBody;
use http::{HeaderMap, Request, Response, StatusCode};
use mcpgate_jsonrpc::{Incoming as Parsed, Message, sse};
use mcpgate_session::{CloseReason, ServerSpec, Session, SessionError};
use tracing::{debug, info};

use crate::body::{Body, status};
use crate::error::FrontError;
use crate::front::Front;
use crate::pump::Pump;
use crate::request::{Principal, accepts, owned_session, read_body};

/// `GET …/sse`: a new session and its stream.
pub(crate) async fn open(
    front: &Arc<Front>,
    server: &Arc<ServerSpec>,
    h: &HeaderMap,
    message_path: &str,
    who: &Principal,
) -> Result<Response<Body>, FrontError> {
    if !accepts(h, "text/event-stream") {
        return Err(FrontError::NotAcceptable(
            "Accept must list text/event-stream",
        ));
    }
    let session = front
        .table
        .create(
            server,
            mcpgate_session::FrontKind::LegacySse,
            who.clone(),
            mcpgate_session::Holder::Server,
        )
        .await?;
    let mut listener = match session.listen(false) {
        Ok(l) => l,
        Err(e) => {
            drop(session.close(CloseReason::InitFailed));
            return Err(e.into());
        }
    };
    let endpoint = format!("{message_path}?sessionId={}", session.id());
    let every = front.cfg.keep_alive;
    info!(session = %session.tag(), server = %server.name, "legacy SSE session opened");
    let guard = CloseOnDrop(session.clone());
    let gauge = session.sse_stream();
    let body = Pump::every(every).body(async_stream::stream! {
        let _guard = guard;
        let _gauge = gauge;
        yield sse::named_event("endpoint", &endpoint);
        while let Some(m) = listener.recv().await {
            yield sse::message_event(None, m.raw());
        }
    });
    Ok(crate::sse::response(body))
}

/// Ends the session when its stream is dropped (the client went away, or the session
/// ended and the stream with it — then this does nothing).
struct CloseOnDrop(Arc<Session>);

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        if !self.0.is_closing() {
            debug!(session = %self.0.tag(), "legacy SSE stream closed by the client");
        }
        drop(self.0.close(CloseReason::ClientGone));
    }
}

/// The `sessionId` query parameter.
pub(crate) fn session_id(query: Option<&str>) -> Option<&str> {
    query?
        .split('&')
        .find_map(|kv| kv.strip_prefix("sessionId="))
}

/// `POST …/message?sessionId=…`: accept a message; its answer goes out on the stream.
pub(crate) async fn post(
    front: &Arc<Front>,
    server: &Arc<ServerSpec>,
    req: Request<ReqBody>,
    who: &Principal,
) -> Result<Response<Body>, FrontError> {
    crate::request::check_json_body(req.headers())?;
    let id = session_id(req.uri().query()).ok_or(FrontError::BadRequest(
        "sessionId query parameter is required",
    ))?;
    // Legacy sessions are never sealed: a sealed id names a Streamable HTTP session.
    if mcpgate_session::looks_sealed(id) {
        return Err(SessionError::NotFound.into());
    }
    let session = owned_session(front, server, id, who)?;
    let body = read_body(front, req)?;
    let msgs = match Message::parse_incoming(body)? {
        Parsed::Single(m) => vec![m],
        Parsed::Batch(v) => v,
    };
    for msg in msgs {
        if msg.is_request() {
            let s = session.clone();
            session.spawn(async move { answer_on_stream(s, msg).await });
        } else {
            session.notify(msg).await.map_err(|e| match e {
                SessionError::Closed => SessionError::NotFound,
                e => e,
            })?;
        }
    }
    Ok(status(StatusCode::ACCEPTED))
}

/// Runs one request and puts everything it yields on the session's stream.
async fn answer_on_stream(session: Arc<Session>, msg: Message) {
    let id = msg.id().cloned();
    let mut ex = match session.request(msg).await {
        Ok(ex) => ex,
        Err(e) => {
            deliver_error(&session, e, id.as_ref());
            return;
        }
    };
    while let Some(item) = ex.next().await {
        match item {
            Ok(m) => session.deliver(m),
            Err(e) => {
                deliver_error(&session, e, id.as_ref());
                return;
            }
        }
    }
}

fn deliver_error(session: &Session, e: SessionError, id: Option<&mcpgate_jsonrpc::Id>) {
    let body = FrontError::from(e).to_jsonrpc().to_body(id);
    if let Ok(m) = Message::parse(body) {
        session.deliver(m);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn session_id_from_query() {
        assert_eq!(super::session_id(Some("a=1&sessionId=abc")), Some("abc"));
        assert_eq!(super::session_id(Some("sessionId=x")), Some("x"));
        assert_eq!(super::session_id(Some("a=1")), None);
        assert_eq!(super::session_id(None), None);
    }
}
