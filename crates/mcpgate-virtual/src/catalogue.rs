//! The merged catalogue: `initialize` and the list methods, from the members' answers.

use std::collections::HashMap;

use mcpgate_jsonrpc::Method;
use serde_json::{Map, Value, json};

use crate::access::{Access, View};
use crate::plan::{Item, Plan};

/// A list method of the catalogue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum List {
    /// `tools/list`.
    Tools,
    /// `prompts/list`.
    Prompts,
    /// `resources/list`.
    Resources,
    /// `resources/templates/list`.
    Templates,
}

impl List {
    /// The list a method asks for.
    pub fn of(method: &Method) -> Option<List> {
        match method {
            Method::ToolsList => Some(List::Tools),
            Method::PromptsList => Some(List::Prompts),
            Method::ResourcesList => Some(List::Resources),
            Method::ResourceTemplatesList => Some(List::Templates),
            _ => None,
        }
    }

    /// Its method.
    pub fn method(self) -> Method {
        match self {
            List::Tools => Method::ToolsList,
            List::Prompts => Method::PromptsList,
            List::Resources => Method::ResourcesList,
            List::Templates => Method::ResourceTemplatesList,
        }
    }

    /// The result's array.
    pub fn key(self) -> &'static str {
        match self {
            List::Tools => "tools",
            List::Prompts => "prompts",
            List::Resources => "resources",
            List::Templates => "resourceTemplates",
        }
    }

    /// The field of an entry that names it.
    pub fn field(self) -> &'static str {
        match self {
            List::Tools | List::Prompts => "name",
            List::Resources => "uri",
            List::Templates => "uriTemplate",
        }
    }

    /// What its entries are, for filters and rules.
    pub fn item(self) -> Item {
        match self {
            List::Tools => Item::Tool,
            List::Prompts => Item::Prompt,
            List::Resources | List::Templates => Item::Resource,
        }
    }

    /// The capability a member needs for it.
    pub fn capability(self) -> &'static str {
        match self {
            List::Tools => "tools",
            List::Prompts => "prompts",
            List::Resources | List::Templates => "resources",
        }
    }
}

/// The server capabilities a virtual server routes.
const ROUTED: &[&str] = &["tools", "prompts", "resources", "logging", "completions"];

/// The merged `InitializeResult` of the members that answered (`(member, result)`, in
/// member order). The protocol version is the members' common one, else the oldest they
/// negotiated (a client that asked for a newer one speaks the older ones too); the
/// capabilities are their union, with `listChanged` always on (the gateway announces a
/// member's departure); the instructions are each member's, headed by its prefix.
pub fn initialize(plan: &Plan, answers: &[(usize, Value)]) -> Value {
    let version = answers
        .iter()
        .filter_map(|(_, r)| r.get("protocolVersion").and_then(Value::as_str))
        .min()
        .unwrap_or(mcpgate_jsonrpc::mcp::LATEST_SESSION_VERSION)
        .to_owned();
    let mut caps = Map::new();
    let mut instructions = Vec::new();
    for (member, r) in answers {
        if let Some(c) = r.get("capabilities").and_then(Value::as_object) {
            // Only what the gateway routes: a member's `tasks` or `experimental` would
            // promise methods no member is chosen for.
            for (k, v) in c.iter().filter(|(k, _)| ROUTED.contains(&k.as_str())) {
                let slot = caps.entry(k.clone()).or_insert_with(|| json!({}));
                if let (Some(slot), Some(v)) = (slot.as_object_mut(), v.as_object()) {
                    for (f, x) in v {
                        let on = x.as_bool().unwrap_or(false)
                            || slot.get(f).and_then(Value::as_bool).unwrap_or(false);
                        if x.is_boolean() {
                            slot.insert(f.clone(), Value::Bool(on));
                        } else {
                            slot.entry(f.clone()).or_insert_with(|| x.clone());
                        }
                    }
                }
            }
        }
        if let Some(text) = r.get("instructions").and_then(Value::as_str)
            && let Some(m) = plan.members.get(*member)
        {
            instructions.push(format!("[{}] {text}", m.prefix));
        }
    }
    for k in ["tools", "prompts", "resources"] {
        if let Some(o) = caps.get_mut(k).and_then(Value::as_object_mut) {
            o.insert("listChanged".into(), Value::Bool(true));
        }
    }
    let mut out = json!({
        "protocolVersion": version,
        "capabilities": caps,
        "serverInfo": {"name": plan.name, "version": env!("CARGO_PKG_VERSION"), "title": format!("mcpgate virtual server {}", plan.name)},
    });
    if !instructions.is_empty() {
        out["instructions"] = Value::String(instructions.join("\n\n"));
    }
    out
}

/// For [`Naming::OnCollision`](crate::Naming): how many members show each own name of
/// the entries in `answers` (what a member's filter hides collides with nothing; the
/// access rules do not count, so every principal sees the same names).
pub fn name_counts(plan: &Plan, list: List, answers: &[(usize, Value)]) -> HashMap<String, usize> {
    let mut counts = HashMap::new();
    for (member, r) in answers {
        let Some(m) = plan.members.get(*member) else {
            continue;
        };
        for entry in r
            .get(list.key())
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(own) = entry
                .get(list.field())
                .and_then(Value::as_str)
                .filter(|own| m.filter(list.item()).shows(own))
            {
                *counts.entry(own.to_owned()).or_insert(0) += 1;
            }
        }
    }
    counts
}

/// One merged page.
#[derive(Debug, Default)]
pub struct Page {
    /// The visible entries, renamed.
    pub entries: Vec<Value>,
    /// Members with more to page, and their cursors.
    pub more: Vec<(usize, Option<String>)>,
    /// Each exposed name's member and own name, for the entries the view shows or
    /// forbids (a forbidden call is refused as such; a hidden one is unknown).
    pub routes: Vec<(String, usize, String)>,
}

/// Merges the members' answers to one list request (`(member, result)`, member order):
/// each entry renamed (names prefixed — or, with `bare`, left as they are when only one
/// member has them; URIs always exposed), kept only when the view shows it; the members'
/// `nextCursor`s kept for the next page.
pub fn page(
    view: &View,
    list: List,
    answers: &[(usize, Value)],
    bare: Option<&HashMap<String, usize>>,
) -> Page {
    let plan = view.plan();
    let mut out = Page::default();
    for (member, r) in answers {
        let member = *member;
        for entry in r
            .get(list.key())
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let Some(own) = entry.get(list.field()).and_then(Value::as_str) else {
                continue;
            };
            let exposed = match list {
                List::Tools | List::Prompts => match bare {
                    Some(counts) if counts.get(own) == Some(&1) && !plan.looks_prefixed(own) => {
                        own.to_owned()
                    }
                    _ => plan.expose(member, own),
                },
                List::Resources | List::Templates => plan.expose_uri(member, own),
            };
            let access = view.check(list.item(), member, own, &exposed);
            if access == Access::Hidden {
                continue;
            }
            if access == Access::Visible {
                let mut e = entry.clone();
                e[list.field()] = Value::String(exposed.clone());
                if list == List::Tools {
                    crate::apps::expose_meta(plan, member, &mut e);
                }
                out.entries.push(e);
            }
            out.routes.push((exposed, member, own.to_owned()));
        }
        if let Some(c) = r.get("nextCursor").and_then(Value::as_str) {
            out.more.push((member, Some(c.to_owned())));
        }
    }
    out
}
