//! What the members of a virtual server's sessions count in the metrics.

use std::sync::Arc;

use mcpgate_compose::MemberEvents;

use crate::metrics::{DeniedLabel, MemberLabel, Metrics};

/// One virtual server's hooks into the metrics.
#[derive(Debug)]
pub(crate) struct Events {
    pub(crate) server: String,
    pub(crate) metrics: Arc<Metrics>,
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
