//! What the workers count, and the errors they saw (by kind, with one example each).

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// The workers' shared counters.
#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) sessions_opened: AtomicU64,
    pub(crate) sessions_deleted: AtomicU64,
    pub(crate) sessions_abandoned: AtomicU64,
    pub(crate) init_failed: AtomicU64,
    pub(crate) calls_ok: AtomicU64,
    pub(crate) calls_failed: AtomicU64,
    pub(crate) notifications: AtomicU64,
    pub(crate) get_streams: AtomicU64,
    pub(crate) get_events: AtomicU64,
    pub(crate) errors: Mutex<BTreeMap<String, (u64, String)>>,
}

impl Counters {
    /// Counts one error of kind `what`; the first `detail` is kept.
    pub(crate) fn error(&self, what: String, detail: impl Into<String>) {
        let mut e = self.errors.lock().unwrap_or_else(|p| p.into_inner());
        let entry = e.entry(what).or_insert((0, detail.into()));
        entry.0 += 1;
    }
}

/// A counter's value.
pub(crate) fn load(c: &AtomicU64) -> u64 {
    c.load(Ordering::Relaxed)
}
