//! Front errors, and the one place an error becomes an HTTP response.

use http::{HeaderValue, Response, StatusCode, header};
use mcpgate_jsonrpc::error as code;
use mcpgate_jsonrpc::{Id, JsonRpcError, Message, ParseError};
use mcpgate_session::{Era, SessionError};
use mcpgate_upstream::{Consent, CredentialError, UpstreamError};
use tracing::info;

use crate::body::{Body, json};

/// Everything that can go wrong answering a client, tagged by where it came from.
#[derive(Debug, thiserror::Error)]
pub enum FrontError {
    /// The client's request is malformed at the HTTP level.
    #[error("Bad Request: {0}")]
    BadRequest(&'static str),
    /// The body is not a JSON-RPC message.
    #[error(transparent)]
    Parse(#[from] ParseError),
    /// The `Accept` header does not allow what the endpoint answers with.
    #[error("Not Acceptable: {0}")]
    NotAcceptable(&'static str),
    /// The body is not `application/json`.
    #[error("Unsupported Media Type: Content-Type must be application/json")]
    UnsupportedMediaType,
    /// The body is larger than the limit.
    #[error("Payload Too Large: the body exceeds {0} bytes")]
    PayloadTooLarge(usize),
    /// The `MCP-Protocol-Version` header names a version mcpgate does not speak.
    #[error("Bad Request: unsupported MCP-Protocol-Version {0}")]
    UnsupportedVersion(String),
    /// The method is not allowed on this endpoint.
    #[error("Method Not Allowed")]
    MethodNotAllowed(&'static str),
    /// No such endpoint.
    #[error("Not Found")]
    NoRoute,
    /// The principal (or client address) sent requests faster than allowed.
    #[error("Too Many Requests: retry in {0} s")]
    RateLimited(u64),
    /// The connection is one of the reserve kept for probes and existing sessions.
    #[error("Service Unavailable: too many connections; retry")]
    Crowded,
    /// The request body did not arrive within the body deadline.
    #[error("Request Timeout: the request body did not arrive within {0:?}")]
    BodyTimeout(std::time::Duration),
    /// The `Host` or `Origin` is not allowed (DNS-rebinding protection).
    #[error("{0}")]
    Forbidden(&'static str),
    /// The session layer (or the upstream behind it) refused.
    #[error(transparent)]
    Session(#[from] SessionError),
    /// A server added or changed by a configuration reload cannot be prepared (never an
    /// answer to a request).
    #[error("configuration reload refused: server {server:?}: {source}")]
    Reload {
        /// The server.
        server: String,
        /// Why.
        source: Box<UpstreamError>,
    },
    /// The reloaded authentication cannot be built (never an answer to a request).
    #[error("configuration reload refused: {0}")]
    ReloadAuth(#[from] mcpgate_tls::TlsError),
}

impl FrontError {
    /// The HTTP status and JSON-RPC code of this error.
    fn status_and_code(&self) -> (StatusCode, i64) {
        use SessionError as S;
        match self {
            FrontError::BadRequest(_) => (StatusCode::BAD_REQUEST, code::BAD_REQUEST),
            FrontError::UnsupportedVersion(_) => {
                (StatusCode::BAD_REQUEST, code::UNSUPPORTED_VERSION)
            }
            FrontError::Parse(e) => (StatusCode::BAD_REQUEST, e.code()),
            FrontError::NotAcceptable(_) => (StatusCode::NOT_ACCEPTABLE, code::BAD_REQUEST),
            FrontError::UnsupportedMediaType => {
                (StatusCode::UNSUPPORTED_MEDIA_TYPE, code::BAD_REQUEST)
            }
            FrontError::PayloadTooLarge(_) => {
                (StatusCode::PAYLOAD_TOO_LARGE, code::INVALID_REQUEST)
            }
            FrontError::MethodNotAllowed(_) => (StatusCode::METHOD_NOT_ALLOWED, code::BAD_REQUEST),
            FrontError::NoRoute => (StatusCode::NOT_FOUND, code::BAD_REQUEST),
            FrontError::Forbidden(_) => (StatusCode::FORBIDDEN, code::BAD_REQUEST),
            FrontError::RateLimited(_) => (StatusCode::TOO_MANY_REQUESTS, code::OVERLOADED),
            FrontError::Crowded => (StatusCode::SERVICE_UNAVAILABLE, code::OVERLOADED),
            FrontError::BodyTimeout(_) => (StatusCode::REQUEST_TIMEOUT, code::BAD_REQUEST),
            FrontError::Reload { .. } | FrontError::ReloadAuth(_) => (
                StatusCode::INTERNAL_SERVER_ERROR,
                mcpgate_jsonrpc::error::INTERNAL_ERROR,
            ),
            FrontError::Session(e) => match e {
                S::NotFound => (StatusCode::NOT_FOUND, code::SESSION_NOT_FOUND),
                S::Closed => (StatusCode::NOT_FOUND, code::SESSION_CLOSED),
                S::TooManySessions | S::ShuttingDown => {
                    (StatusCode::SERVICE_UNAVAILABLE, code::OVERLOADED)
                }
                S::TooManyInflight => (StatusCode::TOO_MANY_REQUESTS, code::OVERLOADED),
                S::StreamConflict => (StatusCode::CONFLICT, code::BAD_REQUEST),
                S::WrongEra => (StatusCode::BAD_REQUEST, code::UNSUPPORTED_VERSION),
                S::Timeout(_) => (StatusCode::GATEWAY_TIMEOUT, code::UPSTREAM_TIMEOUT),
                S::Upstream(UpstreamError::Capacity(_)) => {
                    (StatusCode::SERVICE_UNAVAILABLE, code::OVERLOADED)
                }
                S::TooManySessionsForPrincipal => (StatusCode::TOO_MANY_REQUESTS, code::OVERLOADED),
                S::Upstream(UpstreamError::Timeout(_)) => {
                    (StatusCode::GATEWAY_TIMEOUT, code::UPSTREAM_TIMEOUT)
                }
                S::Upstream(UpstreamError::Credential(CredentialError::Consent(_))) => {
                    (StatusCode::OK, code::URL_ELICITATION_REQUIRED)
                }
                S::Upstream(UpstreamError::Credential(_)) => {
                    (StatusCode::BAD_GATEWAY, code::UPSTREAM_CREDENTIAL)
                }
                S::Upstream(_) | S::Refused(_) => (StatusCode::BAD_GATEWAY, code::UPSTREAM_ERROR),
            },
        }
    }

    /// The JSON-RPC error object for this error.
    pub fn to_jsonrpc(&self) -> JsonRpcError {
        let (_, c) = self.status_and_code();
        let message = match self {
            FrontError::Session(SessionError::Closed) => {
                "Session closed while the request was in flight".to_string()
            }
            FrontError::Session(SessionError::NotFound) => "Session not found".to_string(),
            FrontError::UnsupportedVersion(v) => {
                return mcpgate_jsonrpc::modern::unsupported_version(v);
            }
            FrontError::Session(SessionError::Upstream(UpstreamError::Credential(
                CredentialError::Consent(consent),
            ))) => return consent_error(consent),
            other => other.to_string(),
        };
        JsonRpcError::new(c, message)
    }

    /// The HTTP answer for this error: its status, and a JSON-RPC error body (with the
    /// request's id when there is one).
    pub fn into_response(self, id: Option<&Id>) -> Response<Body> {
        let (status, _) = self.status_and_code();
        let body = self.to_jsonrpc().to_body(id);
        let mut r = json(status, body);
        match &self {
            FrontError::RateLimited(secs) => {
                r.headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from(*secs));
            }
            FrontError::BodyTimeout(_) => {
                r.headers_mut()
                    .insert(header::CONNECTION, HeaderValue::from_static("close"));
            }
            FrontError::Crowded
            | FrontError::Session(
                SessionError::TooManySessions
                | SessionError::TooManyInflight
                | SessionError::TooManySessionsForPrincipal
                | SessionError::ShuttingDown
                | SessionError::Upstream(UpstreamError::Capacity(_)),
            ) => {
                r.headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            }
            FrontError::MethodNotAllowed(allow) => {
                r.headers_mut()
                    .insert(header::ALLOW, HeaderValue::from_static(allow));
            }
            _ => {}
        }
        r
    }

    /// A failure of a request that the gateway accepted: answered as a JSON-RPC error
    /// response with the request's id (HTTP 200, as the upstream's own errors are), so
    /// that the client's pending request fails with a precise code.
    pub fn into_request_answer(self, id: Option<&Id>) -> Response<Body> {
        json(StatusCode::OK, self.to_jsonrpc().to_body(id))
    }

    /// For a 2026-07-28 call that may ask its client (`tools/call`, `resources/read`,
    /// `prompts/get`): a consent the user must give first, as the revision's
    /// `input_required` answer carrying a URL-mode elicitation; the retry (whatever its
    /// `inputResponses`) runs the call again, with the grant once given.
    pub(crate) fn input_required(&self, id: Option<&Id>, method: &str) -> Option<Response<Body>> {
        let FrontError::Session(SessionError::Upstream(UpstreamError::Credential(
            CredentialError::Consent(c),
        ))) = self
        else {
            return None;
        };
        if !mcpgate_bridge::may_ask_client(&mcpgate_jsonrpc::Method::parse(method)) {
            return None;
        }
        let body = serde_json::json!({
            "jsonrpc": "2.0",
            "id": id.map_or(serde_json::Value::Null, Id::to_value),
            "result": {
                "resultType": "input_required",
                "inputRequests": {"consent": {"method": "elicitation/create", "params": {
                    "mode": "url", "url": c.url, "message": c.message,
                }}},
                "requestState": format!("{}{}", mcpgate_bridge::CONSENT_STATE, c.elicitation_id),
            },
        });
        Some(json(StatusCode::OK, body.to_string()))
    }

    /// Whether this failure of a request the gateway had accepted is an HTTP refusal —
    /// the gateway is full or draining, the session is unknown or already streaming: the
    /// client tries again (later, elsewhere, after `initialize`) — rather than a JSON-RPC
    /// error answer of the request (HTTP 200), as an upstream's own errors are.
    fn is_refusal(&self) -> bool {
        matches!(
            self,
            FrontError::Session(
                SessionError::NotFound
                    | SessionError::TooManyInflight
                    | SessionError::TooManySessions
                    | SessionError::TooManySessionsForPrincipal
                    | SessionError::ShuttingDown
                    | SessionError::StreamConflict
                    | SessionError::Upstream(UpstreamError::Capacity(_)),
            )
        )
    }
}

/// The 2025-11-25 `URLElicitationRequiredError` for a consent the user must give first.
fn consent_error(c: &Consent) -> JsonRpcError {
    let data = serde_json::json!({"elicitations": [{
        "mode": "url",
        "elicitationId": c.elicitation_id,
        "url": c.url,
        "message": c.message,
    }]});
    JsonRpcError {
        code: code::URL_ELICITATION_REQUIRED,
        message: c.message.clone(),
        data: Some(data.to_string()),
    }
}

/// Where a request that failed was going, for the log line its failure gets.
#[derive(Debug, Clone, Copy)]
pub(crate) struct At<'a> {
    /// The server.
    pub(crate) server: &'a str,
    /// The request's era.
    pub(crate) era: Era,
    /// Its method.
    pub(crate) method: &'a str,
    /// Its session's tag, when it has one.
    pub(crate) session: Option<&'a str>,
}

impl<'a> At<'a> {
    /// A 2026-07-28 request of `method` to `server`.
    pub(crate) fn stateless(
        server: &'a mcpgate_session::ServerSpec,
        method: &'a mcpgate_jsonrpc::Method,
    ) -> Self {
        Self::named(server, method.as_str())
    }

    /// A 2026-07-28 request of the method called `method` to `server`.
    pub(crate) fn named(server: &'a mcpgate_session::ServerSpec, method: &'a str) -> Self {
        At {
            server: &server.name,
            era: Era::Modern,
            method,
            session: None,
        }
    }
}

/// The answer to a request the gateway accepted and that then failed: a refusal (see
/// [`FrontError::is_refusal`]) or a JSON-RPC error with the request's id; logged either way.
/// The one place that decides.
pub(crate) fn failed(e: impl Into<FrontError>, id: Option<&Id>, at: At<'_>) -> Response<Body> {
    let e = e.into();
    let session = at.session.unwrap_or("-");
    let era = at.era.as_str();
    if at.era == Era::Modern
        && let Some(answer) = e.input_required(id, at.method)
    {
        info!(
            server = at.server,
            era,
            method = at.method,
            "the user must consent to the upstream first: input_required"
        );
        return answer;
    }
    if e.is_refusal() {
        info!(server = at.server, session, era, method = at.method, error = %e, "request refused");
        e.into_response(id)
    } else {
        info!(server = at.server, session, era, method = at.method, id = ?id, error = %e, "request failed");
        e.into_request_answer(id)
    }
}

/// The HTTP status of a JSON-RPC answer from a pipe upstream, as the 2026-07-28 HTTP
/// transport gives it: unknown method 404, header/capability/version refusals 400, the
/// rest (results, handler errors) 200.
pub(crate) fn status_of(m: &Message) -> StatusCode {
    let code = serde_json::from_slice::<serde_json::Value>(m.raw())
        .ok()
        .and_then(|v| v.pointer("/error/code").and_then(serde_json::Value::as_i64));
    match code {
        Some(code::METHOD_NOT_FOUND) => StatusCode::NOT_FOUND,
        Some(code::HEADER_MISMATCH | code::MISSING_CAPABILITY | code::UNSUPPORTED_VERSION) => {
            StatusCode::BAD_REQUEST
        }
        _ => StatusCode::OK,
    }
}
