//! Who a principal is for virtual servers' access rules: its groups, from the
//! configuration (static tokens' `groups`) and from the claims of its latest verified JWT.

use std::collections::HashMap;
use std::sync::Arc;

use arc_swap::ArcSwap;
use mcpgate_virtual::Who;

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

    pub(crate) fn who(&self, principal: Option<&str>) -> Who {
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
