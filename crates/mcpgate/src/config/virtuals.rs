//! `[[virtual]]` entries: virtual servers made of configured servers → [`ServerSpec`]s
//! whose target is a [`VirtualTarget`].

use std::sync::Arc;
use std::time::Duration;

use anyhow::bail;
use mcpgate_compose::{Backend, MemberTarget, VirtualTarget};
use mcpgate_session::{Protocol, ServerSpec};
use mcpgate_upstream::Target;
use mcpgate_virtual::{Effect, Failure, Filter, MemberPlan, Naming, Patterns, Plan, Rule};
use serde::{Deserialize, Serialize};

/// One `[[virtual]]`.
#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawVirtual {
    /// Its name: mounted at `/servers/{name}/mcp`, like a server.
    pub(super) name: String,
    /// Also mounted at `/mcp`.
    #[serde(default)]
    pub(super) default: bool,
    /// Between a member's prefix and a name. Default `"__"`.
    #[serde(default = "default_separator")]
    pub(super) separator: String,
    /// `"always"` (the default): every tool and prompt name gets its member's prefix;
    /// `"on_collision"`: only names two members share.
    #[serde(default)]
    pub(super) prefix: RawNaming,
    /// `"fail_closed"` (the default): a member that cannot start fails the session, one
    /// that dies ends it; `"fail_open"`: the member is dropped and the session goes on.
    #[serde(default)]
    pub(super) failure: RawFailure,
    /// What no rule decides: `"allow"` (the default) or `"deny"`.
    #[serde(default = "default_access")]
    pub(super) default_access: RawEffect,
    /// Its sessions' idle timeout (default: `session.idle_timeout`).
    #[serde(default, with = "humantime_serde")]
    pub(super) idle_timeout: Option<Duration>,
    /// The members, in order (at least one).
    #[serde(default, rename = "member")]
    pub(super) members: Vec<RawMember>,
    /// Access rules, first match wins.
    #[serde(default, rename = "rule")]
    pub(super) rules: Vec<RawRule>,
}

fn default_separator() -> String {
    "__".into()
}

fn default_access() -> RawEffect {
    RawEffect::Allow
}

#[derive(Debug, Default, Deserialize, Serialize, Clone, Copy)]
#[serde(rename_all = "snake_case")]
pub(super) enum RawNaming {
    #[default]
    Always,
    OnCollision,
}

#[derive(Debug, Default, Deserialize, Serialize, Clone, Copy)]
#[serde(rename_all = "snake_case")]
pub(super) enum RawFailure {
    #[default]
    FailClosed,
    FailOpen,
}

#[derive(Debug, Deserialize, Serialize, Clone, Copy)]
#[serde(rename_all = "snake_case")]
pub(super) enum RawEffect {
    Allow,
    Deny,
}

/// One `[[virtual.member]]`.
#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMember {
    /// A `[[server]]` name.
    pub(super) server: String,
    /// Its names' and URIs' prefix. Default: the server's name.
    pub(super) prefix: Option<String>,
    #[serde(default)]
    pub(super) tools: RawFilter,
    #[serde(default)]
    pub(super) prompts: RawFilter,
    /// Matched on URIs and URI templates.
    #[serde(default)]
    pub(super) resources: RawFilter,
}

/// Globs on a member's own names: `allow` (absent: all) minus `deny`.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawFilter {
    pub(super) allow: Option<Vec<String>>,
    #[serde(default)]
    pub(super) deny: Vec<String>,
}

/// One `[[virtual.rule]]`: who (all given fields must match; none: everyone) and what
/// (globs on the prefixed names and exposed URIs).
#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRule {
    pub(super) effect: RawEffect,
    /// Principals by glob: `token:{name}`, `jwt:{sub}`.
    pub(super) principals: Option<Vec<String>>,
    /// Any one of these groups (`[[auth.tokens]] groups`, a JWT's `groups` and `roles`).
    #[serde(default)]
    pub(super) groups: Vec<String>,
    pub(super) tools: Option<Vec<String>>,
    pub(super) prompts: Option<Vec<String>>,
    pub(super) resources: Option<Vec<String>>,
}

fn patterns(at: &str, p: Option<Vec<String>>) -> anyhow::Result<Option<Patterns>> {
    p.map(|p| Patterns::new(at, p))
        .transpose()
        .map_err(Into::into)
}

fn filter(at: &str, f: RawFilter) -> anyhow::Result<Filter> {
    Ok(Filter {
        allow: patterns(&format!("{at}.allow"), f.allow)?,
        deny: patterns(
            &format!("{at}.deny"),
            Some(f.deny).filter(|d| !d.is_empty()),
        )?,
    })
}

/// Validates one virtual server against the configured `servers`.
pub(super) fn virtual_server(
    at: &str,
    v: RawVirtual,
    servers: &[ServerSpec],
) -> anyhow::Result<ServerSpec> {
    super::check::name(at, &v.name)?;
    if servers.iter().any(|s| s.name == v.name) {
        bail!("{at}: a server or virtual server already has this name");
    }
    if v.idle_timeout.is_some_and(|d| d.is_zero()) {
        bail!("{at}: idle_timeout must be above zero");
    }
    let (members, plans): (Vec<_>, Vec<_>) = v
        .members
        .into_iter()
        .enumerate()
        .map(|(i, m)| member(&format!("{at}: member[{i}] ({:?})", m.server), m, servers))
        .collect::<anyhow::Result<Vec<_>>>()?
        .into_iter()
        .unzip();
    let rules = v
        .rules
        .into_iter()
        .enumerate()
        .map(|(i, r)| rule(&format!("{at}: rule[{i}]"), r))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let plan = Plan {
        name: v.name.clone(),
        separator: v.separator,
        naming: match v.prefix {
            RawNaming::Always => Naming::Always,
            RawNaming::OnCollision => Naming::OnCollision,
        },
        failure: match v.failure {
            RawFailure::FailClosed => Failure::Closed,
            RawFailure::FailOpen => Failure::Open,
        },
        members: plans,
        rules,
        default_allow: matches!(v.default_access, RawEffect::Allow),
    };
    plan.check()?;
    let stdio = members
        .iter()
        .any(|m| matches!(m.target, Target::Stdio { .. }));
    let target = Backend::Virtual(Arc::new(VirtualTarget {
        plan: Arc::new(plan),
        members,
    }));
    let mut spec = ServerSpec::new(v.name, target);
    spec.protocol = Protocol::Session;
    spec.idle_timeout = v.idle_timeout;
    spec.evict_idle = stdio;
    Ok(spec)
}

/// One member (`at` names it in errors): a configured `[[server]]`, reachable as a member,
/// with its prefix and filters.
fn member(
    at: &str,
    m: RawMember,
    servers: &[ServerSpec],
) -> anyhow::Result<(MemberTarget, MemberPlan)> {
    let Some(spec) = servers.iter().find(|s| s.name == m.server) else {
        bail!("{at}: no [[server]] has this name");
    };
    let Backend::Server(target) = &spec.backend else {
        bail!("{at}: a member must be a [[server]], not a virtual server");
    };
    if spec.protocol == Protocol::Modern && !matches!(target, Target::Http { .. }) {
        bail!(
            "{at}: a 2026-07-28-only member is reached over Streamable HTTP (transport \"streamable-http\")"
        );
    }
    let reached = MemberTarget {
        target: target.clone(),
        modern: spec.protocol == Protocol::Modern,
    };
    let plan = MemberPlan {
        prefix: m.prefix.unwrap_or_else(|| m.server.clone()),
        server: m.server,
        tools: filter(&format!("{at}.tools"), m.tools)?,
        prompts: filter(&format!("{at}.prompts"), m.prompts)?,
        resources: filter(&format!("{at}.resources"), m.resources)?,
    };
    Ok((reached, plan))
}

/// One access rule (`at` names it in errors): it must name something.
fn rule(at: &str, r: RawRule) -> anyhow::Result<Rule> {
    if r.tools.is_none() && r.prompts.is_none() && r.resources.is_none() {
        bail!("{at}: names nothing (give tools, prompts or resources)");
    }
    Ok(Rule {
        effect: match r.effect {
            RawEffect::Allow => Effect::Allow,
            RawEffect::Deny => Effect::Deny,
        },
        principals: patterns(&format!("{at}.principals"), r.principals)?,
        groups: r.groups,
        tools: patterns(&format!("{at}.tools"), r.tools)?,
        prompts: patterns(&format!("{at}.prompts"), r.prompts)?,
        resources: patterns(&format!("{at}.resources"), r.resources)?,
    })
}
