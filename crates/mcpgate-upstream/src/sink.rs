//! The callback an upstream session delivers unrelated messages and its own end to.

use mcpgate_jsonrpc::Message;

use crate::error::UpstreamError;

/// Receives what an upstream session does that belongs to no particular request. It is
/// called synchronously by the task that read the message, so that a message the
/// upstream sent before a response is routed before that response is delivered (a
/// channel hop here would let the response overtake it). Implementations must not block.
pub trait EventSink: Send + Sync + std::fmt::Debug + 'static {
    /// A server message unrelated to any in-flight request (standalone stream, or a stdio
    /// message that matched no request).
    fn message(&self, msg: Message);
    /// The upstream session ended on its own (process exited, session expired upstream).
    fn closed(&self, why: UpstreamError);
}

/// What an upstream session is opened with, whatever its transport: the client session's
/// name for logs, its cancellation token (child tokens of it stop every task the upstream
/// starts), where unrelated messages go, and whom it is for. The connector adds the owner
/// of those tasks.
#[derive(Debug, Clone)]
pub struct Opening {
    /// The client session's name in logs.
    pub label: std::sync::Arc<str>,
    /// The client session's token.
    pub cancel: tokio_util::sync::CancellationToken,
    /// Where what belongs to no request goes.
    pub sink: std::sync::Arc<dyn EventSink>,
    /// Whom the session is for (its credential toward the server is this principal's).
    pub principal: Option<std::sync::Arc<str>>,
    pub(crate) tasks: tokio_util::task::TaskTracker,
}

impl Opening {
    /// An opening for the session called `label`.
    pub fn new(
        label: &str,
        cancel: tokio_util::sync::CancellationToken,
        sink: std::sync::Arc<dyn EventSink>,
    ) -> Self {
        Opening {
            label: std::sync::Arc::from(label),
            cancel,
            sink,
            principal: None,
            tasks: tokio_util::task::TaskTracker::new(),
        }
    }

    /// The same opening, for `principal`.
    pub fn for_principal(self, principal: Option<std::sync::Arc<str>>) -> Self {
        Opening { principal, ..self }
    }
}
