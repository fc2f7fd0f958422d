//! What every MCP endpoint checks and reads the same way, whatever its era: the
//! principal, `Accept` and `Content-Type`, the body (bounded in size and time), and the
//! session a request names.

use std::sync::Arc;

use crate::body::ReqBody;
use bytes::Bytes;
use http::{HeaderMap, Request, header};
use mcpgate_session::{ServerSpec, Session, SessionError};
use tracing::warn;

use crate::error::FrontError;
use crate::front::Front;

/// The checks every POST to an MCP endpoint passes, in either era: a JSON body, and an
/// `Accept` that takes both answers.
pub(crate) fn check_post_headers(h: &HeaderMap) -> Result<(), FrontError> {
    check_json_body(h)?;
    if !(accepts(h, "application/json") && accepts(h, "text/event-stream")) {
        return Err(FrontError::NotAcceptable(
            "Accept must list application/json and text/event-stream",
        ));
    }
    Ok(())
}

/// A JSON body (`Content-Type: application/json`, parameters allowed), else 415.
pub(crate) fn check_json_body(h: &HeaderMap) -> Result<(), FrontError> {
    let json_body = h
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(';')
                .next()
                .is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json"))
        });
    if json_body {
        Ok(())
    } else {
        Err(FrontError::UnsupportedMediaType)
    }
}

/// Whether the `Accept` header allows `mime` (`type/subtype`).
pub(crate) fn accepts(headers: &HeaderMap, mime: &str) -> bool {
    let (ty, _) = mime.split_once('/').unwrap_or((mime, ""));
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|r| r.split(';').next().unwrap_or("").trim())
        .any(|r| {
            r.eq_ignore_ascii_case(mime)
                || r == "*/*"
                || r.strip_suffix("/*")
                    .is_some_and(|t| t.eq_ignore_ascii_case(ty))
        })
}

/// The authenticated principal of a request (`None` when authentication is off).
pub(crate) type Principal = Option<Arc<str>>;

/// The live session `id` of `server`, if `who` may use it.
pub(crate) fn owned_session(
    front: &Front,
    server: &ServerSpec,
    id: &str,
    who: &Principal,
) -> Result<Arc<Session>, FrontError> {
    match front.table.find(id, server, who.as_ref()) {
        // A sealed session this replica could not resume now (full, draining, upstream
        // unreachable): said as such (503, 429, 502), so the client retries — maybe
        // through another replica — instead of dropping a session that lives on.
        Err(
            e @ (SessionError::TooManySessions
            | SessionError::TooManySessionsForPrincipal
            | SessionError::ShuttingDown
            | SessionError::Upstream(_)),
        ) => Err(e.into()),
        Ok(s) if s.server() == server.name && !s.is_closing() => {
            if s.principal() != who.as_deref() {
                warn!(session = %s.tag(), owner = ?s.principal(), caller = ?who, "session id presented by another principal; refused as unknown");
                return Err(SessionError::NotFound.into());
            }
            Ok(s)
        }
        _ => Err(SessionError::NotFound.into()),
    }
}

/// The request body, at most `max_body` bytes. The connection driver (`h1/`) read it
/// whole within the body deadline before the handler ran, and left unread one declared
/// above what it buffers: either is refused here if above `max_body`.
pub(crate) fn read_body(front: &Front, req: Request<ReqBody>) -> Result<Bytes, FrontError> {
    read_body_of(front, req.into_body())
}

/// [`read_body`] of a request already taken apart.
pub(crate) fn read_body_of(front: &Front, body: ReqBody) -> Result<Bytes, FrontError> {
    let max = front.cfg.max_body;
    match body.into_bytes() {
        Ok(bytes) if bytes.len() <= max => Ok(bytes),
        _ => Err(FrontError::PayloadTooLarge(max)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn h(accept: &str) -> HeaderMap {
        let mut m = HeaderMap::new();
        m.insert(header::ACCEPT, HeaderValue::from_str(accept).unwrap());
        m
    }

    #[test]
    fn accept_matching() {
        assert!(accepts(
            &h("application/json, text/event-stream"),
            "text/event-stream"
        ));
        assert!(accepts(&h("text/event-stream;q=0.9"), "text/event-stream"));
        assert!(accepts(&h("*/*"), "application/json"));
        assert!(accepts(&h("application/*"), "application/json"));
        assert!(!accepts(&h("text/html"), "application/json"));
        assert!(!accepts(&HeaderMap::new(), "application/json"));
    }
}
