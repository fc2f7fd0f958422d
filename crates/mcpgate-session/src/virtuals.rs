//! Sessions of virtual servers: who a principal is for the access rules (its groups,
//! from the directory the configuration fills), what the members' lives count in the
//! metrics, and the opening of a virtual session's members.

use std::collections::HashMap;
use std::sync::Arc;

use arc_swap::ArcSwap;
use mcpgate_upstream::{EventSink, MemberEvents, Upstream, UpstreamError, VirtualTarget};
use mcpgate_virtual::{View, Who};
use tokio_util::sync::CancellationToken;

use crate::metrics::{DeniedLabel, MemberLabel, Metrics};

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
