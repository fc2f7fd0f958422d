//! `subscriptions/listen` through the era bridge: a dedicated upstream session for the
//! stream (not pooled), its GET stream open and `resources/subscribe` sent for the URIs
//! asked for; the client's stream starts with the acknowledgement of what the server can
//! honour and carries those notifications tagged with the listen request's id. The
//! session ends when the stream does (the client closes it, the gateway drains); when
//! the upstream session ends first, the stream's closing response says so.

use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderName, HeaderValue, Response};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use mcpgate_bridge::ListenFilter;
use mcpgate_jsonrpc::{Id, Message, sse};
use mcpgate_session::{CloseReason, ServerSpec, Session};
use tracing::{debug, info};

use crate::answers::request_error;
use crate::body::Body;
use crate::front::Front;
use crate::inflight::Slot;
use crate::request::Who;

/// Answers a `subscriptions/listen` request for a session-era server.
pub(crate) async fn listen(
    front: &Arc<Front>,
    server: &Arc<ServerSpec>,
    msg: &Message,
    who: &Who,
    slot: Slot,
) -> Response<Body> {
    let id = msg.id().cloned().unwrap_or_else(|| Id::number(0));
    let method = mcpgate_jsonrpc::mcp::LISTEN;
    let meta = mcpgate_bridge::Request::of(msg).meta();
    let (session, init) = match front.bridges.dedicated(server, who.clone(), &meta).await {
        Ok(s) => s,
        Err(e) => return request_error(e, Some(&id), server, method),
    };
    let ends = Ends(session.clone());
    let mut honoured = ListenFilter::asked(msg).honoured(&init);
    let mut listener = match session.listen(false) {
        Ok(l) => l,
        Err(e) => return request_error(e, Some(&id), server, method),
    };
    // Only what the server took is acknowledged.
    let mut subscribed = Vec::new();
    for (n, uri) in honoured.uris.iter().enumerate() {
        let sub = Message::parse(mcpgate_bridge::subscribe(&format!("mcpgate-sub-{n}"), uri));
        let Ok(sub) = sub else { continue };
        match session.request(sub).await {
            Ok(mut ex) => {
                while let Some(item) = ex.next().await {
                    match item {
                        Ok(m) if m.is_response() => {
                            let ok = serde_json::from_slice::<serde_json::Value>(m.raw())
                                .is_ok_and(|v| v.get("result").is_some());
                            if ok {
                                subscribed.push(uri.clone());
                            } else {
                                debug!(uri, "bridge: the server refused resources/subscribe");
                            }
                            break;
                        }
                        Ok(_) => {}
                        Err(e) => {
                            debug!(error = %e, uri, "bridge: resources/subscribe failed");
                            break;
                        }
                    }
                }
            }
            Err(e) => return request_error(e, Some(&id), server, method),
        }
    }
    honoured.uris = subscribed;
    info!(server = %server.name, era = "2026", session = %session.tag(), "bridge: listen stream opened on a dedicated session");
    let every = front.cfg.keep_alive;
    let closing = front.closing.clone();
    let body = async_stream::stream! {
        let _slot = slot;
        let _ends = ends;
        yield Ok::<_, std::convert::Infallible>(Frame::data(sse::message_event(None, &mcpgate_bridge::acknowledged(&id, &honoured))));
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = closing.cancelled() => {
                    // The gateway is draining: the server side's graceful end.
                    yield Ok(Frame::data(sse::message_event(None, &mcpgate_bridge::listen_ended(&id))));
                    break;
                }
                m = listener.recv() => match m {
                    Some(m) if m.is_request() => {
                        // No client to ask here: `ping` answered, anything else refused.
                        listener.session().answer_unasked(&m).await;
                    }
                    Some(m) => {
                        if let Some(b) = mcpgate_bridge::for_listener(&m, &honoured, &id) {
                            yield Ok(Frame::data(sse::message_event(None, &b)));
                        }
                    }
                    None => {
                        debug!("bridge: the listen stream's upstream session ended");
                        yield Ok(Frame::data(sse::message_event(None, &mcpgate_bridge::listen_ended(&id))));
                        break;
                    }
                },
                _ = tick.tick() => yield Ok(Frame::data(Bytes::from_static(sse::KEEP_ALIVE))),
            }
        }
    };
    let mut r = crate::sse::response(StreamBody::new(body).boxed_unsync());
    r.headers_mut().insert(
        HeaderName::from_static("x-accel-buffering"),
        HeaderValue::from_static("no"),
    );
    r
}

/// Ends the dedicated session (through its teardown path) with the stream.
struct Ends(Arc<Session>);

impl Drop for Ends {
    fn drop(&mut self) {
        drop(self.0.close(CloseReason::ClientGone));
    }
}
