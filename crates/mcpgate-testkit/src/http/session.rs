//! One HTTP session: its MCP state, its SSE streams, and the HTTP side of the fault tools.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::streams::{EventStream, STANDALONE, Streams};
use super::{State, lock};
use crate::stats::{StatsCell, bump};
use crate::tools::{self, FaultHooks, McpSession, Standalone};

/// A flood waits while its reader's connection has this many events not yet taken.
const FLOOD_WINDOW: usize = 8;

/// One HTTP session: its MCP state and its SSE streams.
pub(super) struct HttpSession {
    pub(super) mcp: McpSession,
    /// Stream `0`: what the standalone GET stream carries.
    pub(super) standalone: Arc<EventStream>,
    /// The POST response streams.
    pub(super) streams: Mutex<Streams>,
    /// Whether [`HttpOptions::cut_after`](super::HttpOptions::cut_after) may still cut a
    /// stream.
    pub(super) cut_armed: Arc<AtomicBool>,
}

impl HttpSession {
    /// A fresh session of the server `state`.
    pub(super) fn new(id: String, state: &State) -> Self {
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
    pub(super) fn stream(&self, num: u64) -> Option<Arc<EventStream>> {
        if num == STANDALONE {
            Some(Arc::clone(&self.standalone))
        } else {
            lock(&self.streams).get(num)
        }
    }

    /// Ends the session: calls end unanswered, every stream's reader ends.
    pub(super) fn end(&self) {
        self.mcp.end();
        self.standalone.finish();
        lock(&self.streams).finish_all();
    }
}

/// The HTTP side of the fault tools: a flood goes to the standalone (GET) stream,
/// paced by the connection reading it and never logged for replay.
struct HttpHooks {
    pub(super) standalone: Arc<EventStream>,
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
