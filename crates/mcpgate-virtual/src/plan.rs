//! A virtual server's plan: members, names, filters, failure policy, access rules.

use globset::{Glob, GlobSet, GlobSetBuilder};

use crate::error::VirtualError;

/// The kinds of catalogue entries a virtual server filters and authorizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Item {
    /// A tool (by name).
    Tool,
    /// A prompt (by name).
    Prompt,
    /// A resource or resource template (by URI or URI template).
    Resource,
}

impl Item {
    /// A label for logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Item::Tool => "tool",
            Item::Prompt => "prompt",
            Item::Resource => "resource",
        }
    }
}

/// How member names are exposed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Naming {
    /// Every tool and prompt name gets its member's prefix.
    #[default]
    Always,
    /// Only names that two members share get their prefix; unique names stay as they
    /// are (a list then reads every page of every member: a collision can only be known
    /// from all the names).
    OnCollision,
}

/// What a member that cannot start, or dies, does to the session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Failure {
    /// The session fails (at initialize) or ends (later).
    #[default]
    Closed,
    /// The member is dropped from the session's catalogue with a log line and
    /// list-changed notifications; the other members go on.
    Open,
}

/// A set of glob patterns (`*`, `?`, `[a-z]`, `{a,b}`), compiled once. Compared by
/// their source text.
#[derive(Debug, Clone)]
pub struct Patterns {
    src: Vec<String>,
    set: GlobSet,
}

impl PartialEq for Patterns {
    fn eq(&self, other: &Self) -> bool {
        self.src == other.src
    }
}

impl Eq for Patterns {}

impl Patterns {
    /// Compiles `src`; `at` names the setting in errors.
    pub fn new(at: &str, src: Vec<String>) -> Result<Self, VirtualError> {
        let mut b = GlobSetBuilder::new();
        for p in &src {
            let g = Glob::new(p).map_err(|source| VirtualError::Glob {
                at: at.to_owned(),
                pattern: p.clone(),
                source,
            })?;
            b.add(g);
        }
        let set = b.build().map_err(|source| VirtualError::Globs {
            at: at.to_owned(),
            source,
        })?;
        Ok(Patterns { src, set })
    }

    /// Whether any pattern matches `s` (none: false).
    pub fn is_match(&self, s: &str) -> bool {
        self.set.is_match(s)
    }

    /// Whether there are no patterns.
    pub fn is_empty(&self) -> bool {
        self.src.is_empty()
    }
}

/// What a member shows of one kind: `allow` (absent: everything) minus `deny`. Matched
/// on the member's own names (URIs for resources).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Filter {
    /// Only these, when given.
    pub allow: Option<Patterns>,
    /// Never these.
    pub deny: Option<Patterns>,
}

impl Filter {
    /// Whether `name` is shown.
    pub fn shows(&self, name: &str) -> bool {
        self.allow.as_ref().is_none_or(|a| a.is_match(name))
            && !self.deny.as_ref().is_some_and(|d| d.is_match(name))
    }
}

/// One member of a virtual server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberPlan {
    /// The configured server (`[[server]]` name).
    pub server: String,
    /// What its names and URIs are prefixed with.
    pub prefix: String,
    /// Which of its tools are shown.
    pub tools: Filter,
    /// Which of its prompts are shown.
    pub prompts: Filter,
    /// Which of its resources (URIs, URI templates) are shown.
    pub resources: Filter,
}

impl MemberPlan {
    /// The filter of one kind.
    pub fn filter(&self, item: Item) -> &Filter {
        match item {
            Item::Tool => &self.tools,
            Item::Prompt => &self.prompts,
            Item::Resource => &self.resources,
        }
    }
}

/// A virtual server: what the configuration says, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Its name (mount point `/servers/{name}/mcp`, log and metric label).
    pub name: String,
    /// Between a prefix and a name (default `__`).
    pub separator: String,
    /// When names get their prefix.
    pub naming: Naming,
    /// What a failing member does.
    pub failure: Failure,
    /// The members, in order (the order of merged lists).
    pub members: Vec<MemberPlan>,
    /// Access rules, first match wins.
    pub rules: Vec<Rule>,
    /// What no rule decides: allowed (`true`) or forbidden.
    pub default_allow: bool,
}

impl Plan {
    /// Checks what makes names reversible: at least one member, prefixes that are
    /// unique, non-empty, free of the separator and usable as a URI scheme's start
    /// (a letter, then letters, digits and `-`), and a non-empty separator.
    pub fn check(&self) -> Result<(), VirtualError> {
        let name = || self.name.clone();
        if self.members.is_empty() {
            return Err(VirtualError::NoMembers { name: name() });
        }
        if self.separator.is_empty() {
            return Err(VirtualError::EmptySeparator { name: name() });
        }
        for (i, m) in self.members.iter().enumerate() {
            let p = &m.prefix;
            let scheme_like = p.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
                && p.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
            if !scheme_like {
                return Err(VirtualError::BadPrefix {
                    name: name(),
                    server: m.server.clone(),
                    prefix: p.clone(),
                });
            }
            if p.contains(&self.separator) {
                return Err(VirtualError::PrefixHasSeparator {
                    name: name(),
                    server: m.server.clone(),
                    prefix: p.clone(),
                    separator: self.separator.clone(),
                });
            }
            if self.members[..i].iter().any(|o| o.prefix == *p) {
                return Err(VirtualError::SharedPrefix {
                    name: name(),
                    prefix: p.clone(),
                });
            }
        }
        Ok(())
    }
}

/// What a rule does to what it matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// Listed and callable.
    Allow,
    /// Neither listed nor callable (a call is refused as forbidden).
    Deny,
}

/// One access rule: a subject (who) and objects (what), matched on the names the client
/// sees (prefixed names, rewritten URIs). A rule without a subject field applies to
/// everyone; a rule applies to a kind only when it has patterns for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// Allow or deny.
    pub effect: Effect,
    /// Principals (`token:{name}`, `jwt:{sub}`) by glob; absent: any.
    pub principals: Option<Patterns>,
    /// Any one of these groups (static tokens' `groups`, a JWT's `groups` and `roles`
    /// claims); empty: any.
    pub groups: Vec<String>,
    /// Tools it is about.
    pub tools: Option<Patterns>,
    /// Prompts it is about.
    pub prompts: Option<Patterns>,
    /// Resources (URIs, URI templates) it is about.
    pub resources: Option<Patterns>,
}
