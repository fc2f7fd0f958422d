//! Prometheus metrics of the session layer.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::eras::Era;
use crate::histogram::Latency;
use mcpgate_jsonrpc::Method;

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

/// Label set of a session's server and front transport.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct Origin {
    pub(crate) server: String,
    pub(crate) front: &'static str,
}

/// Label set of a request: its MCP method (anything unlisted is `other`) and its era
/// (`2025`: session era, `2026`: 2026-07-28).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct MethodLabel {
    pub(crate) method: &'static str,
    pub(crate) era: &'static str,
}

/// Label set with one `era` label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct EraLabel {
    pub(crate) era: &'static str,
}

/// Label set of a server's era gauge.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ServerEra {
    pub(crate) server: String,
    pub(crate) era: &'static str,
}

/// Label set with one `direction` label (`in`: from clients, `out`: to clients).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct Direction {
    pub(crate) direction: &'static str,
}

/// The MCP methods that get their own latency series; bounding the label values keeps
/// a client from creating series at will.
const METHODS: &[Method] = &[
    Method::Initialize,
    Method::Ping,
    Method::ToolsList,
    Method::ToolsCall,
    Method::ResourcesList,
    Method::ResourcesRead,
    Method::ResourceTemplatesList,
    Method::ResourcesSubscribe,
    Method::ResourcesUnsubscribe,
    Method::PromptsList,
    Method::PromptsGet,
    Method::Complete,
    Method::SetLevel,
    Method::Discover,
    Method::Listen,
];

/// The index of `m` in [`METHODS`], or `METHODS.len()` for `other`.
fn method_index(m: &str) -> usize {
    METHODS
        .iter()
        .position(|k| k.as_str() == m)
        .unwrap_or(METHODS.len())
}

/// The eras of the latency series, in index order.
const ERAS: [Era; 2] = [Era::Session, Era::Modern];

/// All gateway metrics; the front renders them at `/metrics`.
#[derive(Debug)]
pub struct Metrics {
    pub(crate) by_origin_active: Family<Origin, Gauge>,
    pub(crate) by_origin_opened: Family<Origin, Counter>,
    pub(crate) request_duration: Family<MethodLabel, Latency>,
    /// Every member of `request_duration`, resolved once: by method index × 2 + era.
    latency: Box<[Latency]>,
    pub(crate) bytes: Family<Direction, Counter>,
    /// The two members of `bytes`, kept at hand: no map lookup per message.
    bytes_in: Counter,
    bytes_out: Counter,
    pub(crate) sse_streams: Gauge,
    pub(crate) replay_dropped: Counter,
    pub(crate) sessions_active: Gauge,
    pub(crate) sessions_opened: Counter,
    pub(crate) sessions_closed: Family<Reason, Counter>,
    pub(crate) upstream_errors: Family<ErrKind, Counter>,
    pub(crate) stdio_children: Gauge,
    pub(crate) requests: Family<EraLabel, Counter>,
    /// The members of `requests`, kept at hand.
    requests_2025: Counter,
    requests_2026: Counter,
    pub(crate) server_era: Family<ServerEra, Gauge>,
    pub(crate) backlog_dropped: Counter<u64, AtomicU64>,
    pub(crate) virtuals: VirtualMetrics,
}

impl Default for Metrics {
    fn default() -> Self {
        let bytes: Family<Direction, Counter> = Family::default();
        let bytes_in = bytes.get_or_create(&Direction { direction: "in" }).clone();
        let bytes_out = bytes.get_or_create(&Direction { direction: "out" }).clone();
        let requests: Family<EraLabel, Counter> = Family::default();
        let requests_2025 = requests
            .get_or_create(&EraLabel {
                era: Era::Session.as_str(),
            })
            .clone();
        let requests_2026 = requests
            .get_or_create(&EraLabel {
                era: Era::Modern.as_str(),
            })
            .clone();
        let request_duration: Family<MethodLabel, Latency> = Family::default();
        let latency = METHODS
            .iter()
            .map(|m| m.static_name().unwrap_or("other"))
            .chain(["other"])
            .flat_map(|method| {
                ERAS.map(|era| MethodLabel {
                    method,
                    era: era.as_str(),
                })
            })
            .map(|labels| request_duration.get_or_create(&labels).clone())
            .collect();
        Metrics {
            bytes_in,
            bytes_out,
            by_origin_active: Family::default(),
            by_origin_opened: Family::default(),
            request_duration,
            latency,
            bytes,
            sse_streams: Gauge::default(),
            replay_dropped: Counter::default(),
            sessions_active: Gauge::default(),
            sessions_opened: Counter::default(),
            sessions_closed: Family::default(),
            upstream_errors: Family::default(),
            stdio_children: Gauge::default(),
            requests,
            requests_2025,
            requests_2026,
            server_era: Family::default(),
            backlog_dropped: Counter::default(),
            virtuals: Default::default(),
        }
    }
}

/// Counts an open SSE stream until dropped.
#[derive(Debug)]
pub struct StreamGauge(Gauge);

impl Drop for StreamGauge {
    fn drop(&mut self) {
        self.0.dec();
    }
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
            "Client requests forwarded upstream, by era (2025: session era, 2026: 2026-07-28)",
            self.requests.clone(),
        );
        registry.register(
            "mcpgate_server_era",
            "1 for the protocol era each server is known to speak (2025, 2026, unknown)",
            self.server_era.clone(),
        );
        registry.register(
            "mcpgate_server_sessions_active",
            "Client sessions currently open, by server and front transport",
            self.by_origin_active.clone(),
        );
        registry.register(
            "mcpgate_server_sessions_opened",
            "Client sessions opened, by server and front transport",
            self.by_origin_opened.clone(),
        );
        registry.register(
            "mcpgate_request_duration_seconds",
            "Time from a client request to its response, by MCP method and era",
            self.request_duration.clone(),
        );
        registry.register(
            "mcpgate_message_bytes",
            "JSON-RPC message bytes from clients (in) and to clients (out)",
            self.bytes.clone(),
        );
        registry.register(
            "mcpgate_sse_streams",
            "SSE streams open to clients",
            self.sse_streams.clone(),
        );
        registry.register(
            "mcpgate_replay_dropped",
            "Events dropped from SSE replay logs because a log was full",
            self.replay_dropped.clone(),
        );
        registry.register(
            "mcpgate_backlog_dropped",
            "Server messages a client did not get: a session's backlog was full, or a client read a stream more slowly than the upstream wrote it",
            self.backlog_dropped.clone(),
        );
        self.virtuals.register(registry);
    }

    /// Counts an SSE stream to a client as open until the returned guard is dropped.
    pub fn sse_stream(&self) -> StreamGauge {
        self.sse_streams.inc();
        StreamGauge(self.sse_streams.clone())
    }

    pub(crate) fn bytes(&self, direction: &'static str, n: usize) {
        let c = if direction == "in" {
            &self.bytes_in
        } else {
            &self.bytes_out
        };
        c.inc_by(n as u64);
    }

    /// Counts a session-era request.
    pub(crate) fn session_request(&self) {
        self.requests_2025.inc();
    }

    /// Counts a 2026-07-28 request and returns when it started, for [`Metrics::observe`].
    pub fn modern_request(&self) -> std::time::Instant {
        self.requests_2026.inc();
        std::time::Instant::now()
    }

    /// Records a request's latency.
    pub fn observe(&self, method: &str, era: Era, started: std::time::Instant) {
        self.observe_series(Self::series(method, era), started);
    }

    /// The latency series of `method` in `era`, for [`Metrics::observe_series`].
    pub(crate) fn series(method: &str, era: Era) -> usize {
        method_index(method) * 2 + usize::from(era == Era::Modern)
    }

    /// Records a request's latency in a series resolved with [`Metrics::series`].
    pub(crate) fn observe_series(&self, series: usize, started: std::time::Instant) {
        if let Some(h) = self.latency.get(series) {
            h.observe(started.elapsed());
        }
    }

    /// Sets the era gauge of `server` (1 for `era`, 0 for the others).
    pub(crate) fn set_era(&self, server: &str, era: Era) {
        for e in [Era::Session, Era::Modern, Era::Unknown] {
            self.server_era
                .get_or_create(&ServerEra {
                    server: server.to_owned(),
                    era: e.as_str(),
                })
                .set(i64::from(e == era));
        }
    }

    pub(crate) fn upstream_error(&self, kind: &'static str) {
        self.upstream_errors.get_or_create(&ErrKind { kind }).inc();
    }
}

/// Label set of a virtual server's member.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct MemberLabel {
    pub(crate) server: String,
    pub(crate) member: String,
}

/// Label set of a refusal by the access rules.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct DeniedLabel {
    pub(crate) server: String,
    pub(crate) kind: &'static str,
}

/// The virtual servers' metrics.
#[derive(Debug, Default)]
pub(crate) struct VirtualMetrics {
    pub(crate) members_up: Family<MemberLabel, Gauge>,
    pub(crate) member_failures: Family<MemberLabel, Counter>,
    pub(crate) denied: Family<DeniedLabel, Counter>,
}

impl VirtualMetrics {
    pub(crate) fn register(&self, registry: &mut Registry) {
        registry.register(
            "mcpgate_virtual_members_up",
            "Member sessions of virtual servers' client sessions that are up, by virtual server and member",
            self.members_up.clone(),
        );
        registry.register(
            "mcpgate_virtual_member_failures",
            "Members that could not start or failed under a live session and were dropped from it (fail_open), by virtual server and member",
            self.member_failures.clone(),
        );
        registry.register(
            "mcpgate_virtual_denied",
            "Calls and reads a virtual server's access rules refused, by virtual server and kind",
            self.denied.clone(),
        );
    }
}
