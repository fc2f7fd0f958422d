//! Sessions of virtual servers: who a principal is for the access rules (its groups,
//! from the directory the configuration fills), what the members' lives count in the
//! metrics, and the opening of a virtual session's members.

use std::collections::HashMap;
use std::sync::Arc;

use arc_swap::ArcSwap;
use mcpgate_upstream::{EventSink, MemberEvents, Upstream, UpstreamError, VirtualTarget};
use mcpgate_virtual::{View, Who};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tokio_util::sync::CancellationToken;

use crate::metrics::Metrics;

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

/// One virtual session's hooks into the metrics.
#[derive(Debug)]
struct Events {
    server: String,
    metrics: Arc<Metrics>,
}

impl Events {
    fn member(&self, member: &str) -> MemberLabel {
        MemberLabel {
            server: self.server.clone(),
            member: member.to_owned(),
        }
    }
}

impl MemberEvents for Events {
    fn up(&self, member: &str, up: bool) {
        let g = self
            .metrics
            .virtuals
            .members_up
            .get_or_create(&self.member(member));
        if up {
            g.inc();
        } else {
            g.dec();
        }
    }

    fn denied(&self, kind: &'static str) {
        self.metrics
            .virtuals
            .denied
            .get_or_create(&DeniedLabel {
                server: self.server.clone(),
                kind,
            })
            .inc();
    }

    fn failed(&self, member: &str) {
        self.metrics
            .virtuals
            .member_failures
            .get_or_create(&self.member(member))
            .inc();
    }
}

/// Each principal's groups (static tokens' `groups`), swapped whole on reload.
#[derive(Debug, Default)]
pub(crate) struct Directory(ArcSwap<HashMap<String, Vec<String>>>);

impl Directory {
    pub(crate) fn set(&self, groups: HashMap<String, Vec<String>>) {
        self.0.store(Arc::new(groups));
    }

    fn who(&self, principal: Option<&str>) -> Who {
        let groups = principal
            .and_then(|p| self.0.load().get(p).cloned())
            .unwrap_or_default();
        Who {
            principal: principal.map(str::to_owned),
            groups,
        }
    }
}

/// What opening a virtual session's members needs from the table.
pub(crate) struct Opening<'a> {
    pub(crate) server: &'a str,
    pub(crate) principal: Option<Arc<str>>,
    pub(crate) tag: &'a str,
    pub(crate) cancel: CancellationToken,
    pub(crate) sink: Arc<dyn EventSink>,
}

/// Opens the members of virtual server `v` for one client session, with the principal's
/// view of the plan.
pub(crate) fn open(
    connector: &mcpgate_upstream::Connector,
    metrics: &Arc<Metrics>,
    directory: &Directory,
    v: &VirtualTarget,
    o: Opening<'_>,
) -> Result<Upstream, UpstreamError> {
    let who = directory.who(o.principal.as_deref());
    let view = View::new(v.plan.clone(), &who);
    let events = Arc::new(Events {
        server: o.server.to_owned(),
        metrics: metrics.clone(),
    });
    connector.open_members(v, view, o.tag, o.principal, o.cancel, o.sink, events)
}
