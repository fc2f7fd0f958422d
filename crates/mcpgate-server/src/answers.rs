//! What the 2026-07-28 paths (pass-through, leased stdio children, the era bridge)
//! answer alike: the HTTP status of a JSON-RPC answer, a failed request's error, and the
//! end-of-answer hook.

use http::{Response, StatusCode};
use mcpgate_jsonrpc::Message;
use mcpgate_session::ServerSpec;
use tracing::info;

use crate::body::Body;
use crate::error::FrontError;

/// The HTTP status of a JSON-RPC answer from a pipe upstream, as the 2026-07-28 HTTP
/// transport gives it: unknown method 404, header/capability/version refusals 400, the
/// rest (results, handler errors) 200.
pub(crate) fn status_of(m: &Message) -> StatusCode {
    let code = serde_json::from_slice::<serde_json::Value>(m.raw())
        .ok()
        .and_then(|v| v.pointer("/error/code").and_then(serde_json::Value::as_i64));
    match code {
        Some(mcpgate_jsonrpc::error::METHOD_NOT_FOUND) => StatusCode::NOT_FOUND,
        Some(
            mcpgate_jsonrpc::error::HEADER_MISMATCH
            | mcpgate_jsonrpc::error::MISSING_CAPABILITY
            | mcpgate_jsonrpc::error::UNSUPPORTED_VERSION,
        ) => StatusCode::BAD_REQUEST,
        _ => StatusCode::OK,
    }
}

/// A failure of an accepted 2026-07-28 request, as a JSON-RPC error with its id.
pub(crate) fn request_error(
    e: mcpgate_session::SessionError,
    id: Option<&mcpgate_jsonrpc::Id>,
    server: &ServerSpec,
    method: &str,
) -> Response<Body> {
    info!(server = %server.name, era = "2026", method, error = %e, "2026-07-28 request failed");
    match e {
        mcpgate_session::SessionError::TooManyInflight
        | mcpgate_session::SessionError::Upstream(mcpgate_upstream::UpstreamError::Capacity(_)) => {
            FrontError::from(e).into_response(id)
        }
        e => FrontError::from(e).into_request_answer(id),
    }
}

/// Runs a closure once, when dropped (the end of an answer, however it ends).
pub(crate) struct OnDrop<F: FnOnce()>(Option<F>);

impl<F: FnOnce()> OnDrop<F> {
    /// Runs `f` when dropped.
    pub(crate) fn new(f: F) -> Self {
        OnDrop(Some(f))
    }
}

impl<F: FnOnce()> Drop for OnDrop<F> {
    fn drop(&mut self) {
        if let Some(f) = self.0.take() {
            f();
        }
    }
}
