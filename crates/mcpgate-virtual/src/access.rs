//! Who may see and use what: access rules, one principal's view of them.

use std::sync::Arc;

use crate::plan::{Effect, Item, Naming, Patterns, Plan, Rule};

impl Rule {
    fn objects(&self, item: Item) -> Option<&Patterns> {
        match item {
            Item::Tool => self.tools.as_ref(),
            Item::Prompt => self.prompts.as_ref(),
            Item::Resource => self.resources.as_ref(),
        }
    }

    fn applies_to(&self, who: &Who) -> bool {
        let principal = match (&self.principals, &who.principal) {
            (None, _) => true,
            (Some(p), Some(name)) => p.is_match(name),
            (Some(_), None) => false,
        };
        principal && (self.groups.is_empty() || self.groups.iter().any(|g| who.groups.contains(g)))
    }
}

/// The identity a view is made for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Who {
    /// The principal (`None` when authentication is off).
    pub principal: Option<String>,
    /// Its groups.
    pub groups: Vec<String>,
}

/// How one entry stands for one principal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Listed and callable.
    Visible,
    /// Not offered by its member's filter: as if it did not exist.
    Hidden,
    /// Denied by the access rules: not listed; a call is refused as forbidden.
    Forbidden,
}

/// One principal's view of a plan: the rules whose subject matches it, picked once (at
/// session creation), so judging an entry only matches the objects' compiled globs.
#[derive(Debug, Clone)]
pub struct View {
    plan: Arc<Plan>,
    rules: Box<[u16]>,
}

impl View {
    /// The view of `plan` for `who`.
    pub fn new(plan: Arc<Plan>, who: &Who) -> Self {
        let rules = plan
            .rules
            .iter()
            .enumerate()
            .filter(|(_, r)| r.applies_to(who))
            .filter_map(|(i, _)| u16::try_from(i).ok())
            .collect();
        View { plan, rules }
    }

    /// The plan.
    pub fn plan(&self) -> &Arc<Plan> {
        &self.plan
    }

    /// How member `member`'s entry `own` (its own name or URI), exposed as `exposed`,
    /// stands. Rules match the prefixed form (`{prefix}{separator}{own}`, the exposed URI),
    /// also where `on_collision` leaves a name bare: whether a rule applies must not
    /// depend on what other members offer.
    pub fn check(&self, item: Item, member: usize, own: &str, exposed: &str) -> Access {
        let shown = self
            .plan
            .members
            .get(member)
            .is_some_and(|m| m.filter(item).shows(own));
        if !shown {
            return Access::Hidden;
        }
        let prefixed;
        let subject = if self.plan.naming == Naming::OnCollision && item != Item::Resource {
            prefixed = self.plan.expose(member, own);
            prefixed.as_str()
        } else {
            exposed
        };
        for &i in &self.rules {
            let Some(rule) = self.plan.rules.get(usize::from(i)) else {
                continue;
            };
            if rule.objects(item).is_some_and(|p| p.is_match(subject)) {
                return match rule.effect {
                    Effect::Allow => Access::Visible,
                    Effect::Deny => Access::Forbidden,
                };
            }
        }
        if self.plan.default_allow {
            Access::Visible
        } else {
            Access::Forbidden
        }
    }
}
