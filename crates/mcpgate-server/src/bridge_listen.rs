//! `subscriptions/listen` through the era bridge: a dedicated upstream session for the
//! stream (not pooled), its GET stream open and `resources/subscribe` sent for the URIs
//! asked for; the client's stream starts with the acknowledgement of what the server can
//! honour and carries those notifications tagged with the listen request's id. The
//! session ends when the stream does (the client closes it, the gateway drains); when
//! the upstream session ends first, the stream's closing response says so.

use std::sync::Arc;

use http::Response;
use mcpgate_bridge::ListenFilter;
use mcpgate_jsonrpc::{Id, Message, Method, sse};
use mcpgate_session::{CloseReason, Era, Session, SessionError};
use tracing::{debug, info};

use crate::body::Body;
use crate::error::failed;
use crate::inflight::Permit;
use crate::plan::Cx;
use crate::pump::Pump;

/// Answers a `subscriptions/listen` request for a session-era server.
pub(crate) async fn listen(cx: Cx<'_>, msg: &Message, permit: Permit) -> Response<Body> {
    let Cx { front, server, who } = cx;
    let id = msg.id().cloned().unwrap_or_else(|| Id::number(0));
    let at = crate::error::At::stateless(server, &Method::Listen);
    let meta = mcpgate_bridge::Request::of(msg).meta();
    let (session, init) = match front.table.bridge_session(server, who.clone(), &meta).await {
        Ok(s) => s,
        Err(e) => return failed(e, Some(&id), at),
    };
    let ends = Ends(session.clone());
    let mut honoured = ListenFilter::asked(msg).honoured(&init);
    let mut listener = match session.listen(false) {
        Ok(l) => l,
        Err(e) => return failed(e, Some(&id), at),
    };
    // Only what the server took is acknowledged.
    let subscribed = match subscribe_all(&session, &honoured.uris).await {
        Ok(s) => s,
        Err(e) => return failed(e, Some(&id), at),
    };
    honoured.uris = subscribed;
    info!(server = %server.name, era = Era::Modern.as_str(), session = %session.tag(), "bridge: listen stream opened on a dedicated session");
    let ended = mcpgate_bridge::listen_ended(&id);
    let events = async_stream::stream! {
        let _permit = permit;
        let _ends = ends;
        yield sse::message_event(None, &mcpgate_bridge::acknowledged(&id, &honoured));
        while let Some(m) = listener.recv().await {
            if m.is_request() {
                // No client to ask here: `ping` answered, anything else refused.
                listener.session().answer_unasked(&m).await;
            } else if let Some(b) = mcpgate_bridge::for_listener(&m, &honoured, &id) {
                yield sse::message_event(None, &b);
            }
        }
        debug!("bridge: the listen stream's upstream session ended");
        yield sse::message_event(None, &mcpgate_bridge::listen_ended(&id));
    };
    // The gateway draining is the server side's graceful end.
    let pump = Pump::every(front.cfg.keep_alive)
        .until(front.closing.clone())
        .farewell(sse::message_event(None, &ended));
    crate::sse::response(pump.body(events))
}

/// `resources/subscribe` for each of `uris` on the dedicated session; those the server
/// took.
async fn subscribe_all(
    session: &Arc<Session>,
    uris: &[String],
) -> Result<Vec<String>, SessionError> {
    let mut subscribed = Vec::new();
    for (n, uri) in uris.iter().enumerate() {
        let sub = Message::parse(mcpgate_bridge::subscribe(&format!("mcpgate-sub-{n}"), uri));
        let Ok(sub) = sub else { continue };
        let mut ex = session.request(sub).await?;
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
    Ok(subscribed)
}

/// Ends the dedicated session (through its teardown path) with the stream.
struct Ends(Arc<Session>);

impl Drop for Ends {
    fn drop(&mut self) {
        drop(self.0.close(CloseReason::ClientGone));
    }
}
