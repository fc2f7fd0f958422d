//! The MCP server logic shared by both transports: message classification,
//! `initialize`, tools, resources (with subscriptions), prompts,
//! server-to-client requests (sampling, roots) and cancellation. Transports
//! only frame messages and route them here.
//!
//! Layout: [`catalogue`] (versions, tool list, resource, prompt, result shapes),
//! [`session`] (one session's state and request handling), [`messages`] (the
//! server-to-client messages the tools send), [`subscriptions`] (resource subscriptions
//! across sessions), [`host`] (unlisted host probes: files, TCP, memory, threads). The transports' view is re-exported here.

use std::sync::{Arc, Mutex, MutexGuard};

use futures::future::BoxFuture;
use tokio::sync::mpsc;

mod catalogue;
mod host;
mod messages;
mod session;
mod subscriptions;

pub(crate) use catalogue::{SUPPORTED_VERSIONS, label, streams, tool_name};
pub(crate) use messages::{flood_notification, timer_notification};
pub(crate) use session::McpSession;
pub(crate) use subscriptions::Subscriptions;

/// Where related server-to-client messages go, already serialized.
pub(crate) type Outbound = mpsc::UnboundedSender<String>;

/// A session's standalone channel (the HTTP GET stream, stdout for stdio):
/// sends one serialized message, true if it reached a live reader.
pub(crate) type Standalone = Arc<dyn Fn(String) -> bool + Send + Sync>;

/// Transport hooks for the fault tools that need more than serialized messages on a
/// channel: a flood paced by its reader, and bytes that are not text.
pub(crate) trait FaultHooks: Send + Sync {
    /// Sends `count` notifications of about `size` bytes each on the session's
    /// standalone channel, as fast as its reader takes them (nothing is kept for
    /// replay); resolves to how many were handed to a reader (HTTP) or queued for
    /// stdout (stdio, where they are written before anything queued later).
    fn flood(&self, count: u64, size: usize) -> BoxFuture<'static, u64>;
    /// Queues one line of bytes that are not UTF-8 for the standalone channel,
    /// ahead of anything queued later (stdio); false when the transport cannot.
    fn binary_line(&self) -> bool;
}

/// What a request ended in.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// A serialized JSON-RPC response to send.
    Reply(String),
    /// No answer at all (cancelled, or the session ended first).
    Silent,
    /// The server must die without answering (`die` tool).
    Die,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
