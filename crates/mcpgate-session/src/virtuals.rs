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

/// Where an authenticator tells each verified JWT's principal and groups (see
/// [`crate::SessionTable::groups_sink`]).
pub type GroupsSink = Arc<dyn Fn(&str, Vec<String>) + Send + Sync>;

/// Most JWT principals whose groups are remembered (beyond: forgotten, and learned again
/// at their next verification).
const LEARNED: usize = 10_000;

/// Each principal's groups: static tokens' `groups` (swapped whole on reload) and, for JWT
/// principals, the `groups` and `roles` claims of their latest verified token.
#[derive(Debug, Default)]
pub(crate) struct Directory {
    configured: ArcSwap<HashMap<String, Vec<String>>>,
    learned: dashmap::DashMap<String, Vec<String>>,
}

impl Directory {
    pub(crate) fn set(&self, groups: HashMap<String, Vec<String>>) {
        self.configured.store(Arc::new(groups));
    }

    pub(crate) fn learn(&self, principal: &str, groups: Vec<String>) {
        if self.learned.len() >= LEARNED && !self.learned.contains_key(principal) {
            self.learned.clear();
        }
        self.learned.insert(principal.to_owned(), groups);
    }

    fn who(&self, principal: Option<&str>) -> Who {
        let mut groups = principal
            .and_then(|p| self.configured.load().get(p).cloned())
            .unwrap_or_default();
        if let Some(learned) = principal.and_then(|p| self.learned.get(p)) {
            groups.extend(learned.value().iter().cloned());
        }
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
