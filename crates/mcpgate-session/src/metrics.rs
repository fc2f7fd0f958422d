//! Prometheus metrics of the session layer.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// Label set with one `reason` label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct Reason {
    pub(crate) reason: &'static str,
}

/// Label set with one `kind` label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ErrKind {
    pub(crate) kind: &'static str,
}

/// All gateway metrics; the front renders them at `/metrics`.
#[derive(Debug, Default)]
pub struct Metrics {
    pub(crate) sessions_active: Gauge,
    pub(crate) sessions_opened: Counter,
    pub(crate) sessions_closed: Family<Reason, Counter>,
    pub(crate) upstream_errors: Family<ErrKind, Counter>,
    pub(crate) stdio_children: Gauge,
    pub(crate) requests: Counter,
    pub(crate) backlog_dropped: Counter<u64, AtomicU64>,
}

impl Metrics {
    /// Registers every metric under the `mcpgate_` prefix.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "mcpgate_sessions_active",
            "Client sessions currently open",
            self.sessions_active.clone(),
        );
        registry.register(
            "mcpgate_sessions_opened",
            "Client sessions opened",
            self.sessions_opened.clone(),
        );
        registry.register(
            "mcpgate_sessions_closed",
            "Client sessions closed, by reason",
            self.sessions_closed.clone(),
        );
        registry.register(
            "mcpgate_upstream_errors",
            "Upstream failures, by kind",
            self.upstream_errors.clone(),
        );
        registry.register(
            "mcpgate_stdio_children",
            "Live stdio upstream processes",
            self.stdio_children.clone(),
        );
        registry.register(
            "mcpgate_requests",
            "Client requests forwarded upstream",
            self.requests.clone(),
        );
        registry.register(
            "mcpgate_backlog_dropped",
            "Server messages dropped because a session's backlog was full",
            self.backlog_dropped.clone(),
        );
    }

    pub(crate) fn upstream_error(&self, kind: &'static str) {
        self.upstream_errors.get_or_create(&ErrKind { kind }).inc();
    }
}
