//! What every session of a gateway runs with: the limits and timers, the metrics, the
//! owner of its tasks and the root of its tokens, the clock, and the state behind sealed
//! ids that a DELETE updates.

use std::sync::Arc;
use std::time::Instant;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::SessionConfig;
use crate::metrics::Metrics;
use crate::sealer::Sealer;

/// See the module docs.
pub(crate) struct Runtime {
    pub(crate) cfg: SessionConfig,
    pub(crate) metrics: Arc<Metrics>,
    /// Owns every task a session starts (session tasks, teardowns, the reaper).
    pub(crate) tracker: TaskTracker,
    /// Parent of every session's token.
    pub(crate) root: CancellationToken,
    epoch: Instant,
    /// Sealed session ids: the key ring and what bounds tokens of stateless upstreams.
    pub(crate) sealer: Sealer,
}

impl Runtime {
    pub(crate) fn new(cfg: SessionConfig, metrics: Arc<Metrics>) -> Self {
        Runtime {
            cfg,
            metrics,
            tracker: TaskTracker::new(),
            root: CancellationToken::new(),
            epoch: Instant::now(),
            sealer: Sealer::default(),
        }
    }

    /// Milliseconds since the runtime started (the sessions' clock).
    pub(crate) fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }
}
