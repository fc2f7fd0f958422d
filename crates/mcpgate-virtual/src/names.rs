//! Names, URIs, ids and cursors across the boundary between the client and the members.

use std::borrow::Cow;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use mcpgate_jsonrpc::Id;

use crate::error::VirtualError;
use crate::plan::Plan;

/// What server requests' ids start with toward the client.
const ID_TAG: &str = "mcpgate:";

/// The scheme of MCP Apps' resources (`ui://…`, SEP-1865).
pub(crate) const UI_SCHEME: &str = "ui://";

impl Plan {
    /// Member `member`'s tool or prompt `name` with its prefix.
    pub fn expose(&self, member: usize, name: &str) -> String {
        let prefix = self.members.get(member).map_or("", |m| m.prefix.as_str());
        let mut s = String::with_capacity(prefix.len() + self.separator.len() + name.len());
        s.push_str(prefix);
        s.push_str(&self.separator);
        s.push_str(name);
        s
    }

    /// Whether `name` reads as some member's prefixed name (`{prefix}{separator}…`): such
    /// a name is never left bare, so that it cannot stand for two entries.
    pub fn looks_prefixed(&self, name: &str) -> bool {
        self.members.iter().any(|m| {
            name.strip_prefix(m.prefix.as_str())
                .is_some_and(|rest| rest.starts_with(self.separator.as_str()))
        })
    }

    /// Member `member`'s resource URI (or URI template) as the client sees it:
    /// `{prefix}+{uri}`, still a URI (the prefix extends its scheme) and reversible. An
    /// MCP App's `ui://` URI keeps its scheme (hosts load only `ui://` resources as apps):
    /// `ui://{prefix}+{rest}`, the prefix heading its authority.
    pub fn expose_uri(&self, member: usize, uri: &str) -> String {
        let prefix = self.members.get(member).map_or("", |m| m.prefix.as_str());
        match uri.strip_prefix(UI_SCHEME) {
            Some(rest) => format!("{UI_SCHEME}{prefix}+{rest}"),
            None => format!("{prefix}+{uri}"),
        }
    }

    /// The member and own URI of a URI the client has seen (see [`Plan::expose_uri`]).
    pub fn route_uri<'a>(&self, exposed: &'a str) -> Option<(usize, Cow<'a, str>)> {
        let member = |prefix: &str| self.members.iter().position(|m| m.prefix == prefix);
        if let Some(rest) = exposed.strip_prefix(UI_SCHEME) {
            let (prefix, own) = rest.split_once('+')?;
            return Some((member(prefix)?, Cow::Owned(format!("{UI_SCHEME}{own}"))));
        }
        let (prefix, own) = exposed.split_once('+')?;
        Some((member(prefix)?, Cow::Borrowed(own)))
    }
}

/// Member `member`'s request id as the client sees it: a string naming the member
/// and carrying the member's id, so the client's answer finds its way back without a
/// table.
pub(crate) fn tag_id(member: usize, id: &Id) -> Id {
    let text = format!("{ID_TAG}{member}:{}", id.as_raw());
    let raw = serde_json::Value::String(text).to_string();
    Id::from_raw(&raw).unwrap_or_else(|_| id.clone())
}

/// The member and its own id of an id made by [`tag_id`].
pub(crate) fn untag_id(id: &Id) -> Option<(usize, Id)> {
    let text: String = serde_json::from_str(id.as_raw()).ok()?;
    let rest = text.strip_prefix(ID_TAG)?;
    let (member, own) = rest.split_once(':')?;
    Some((member.parse().ok()?, Id::from_raw(own).ok()?))
}

/// Where a merged list goes on: the members still to page, each with its own cursor
/// (`None`: from its first page). Opaque to the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor(pub Vec<(usize, Option<String>)>);

impl Cursor {
    /// The cursor's text.
    pub fn encode(&self) -> String {
        let v: Vec<serde_json::Value> = self
            .0
            .iter()
            .map(|(m, c)| serde_json::json!([m, c]))
            .collect();
        let json = serde_json::Value::Array(v).to_string();
        format!("v1.{}", URL_SAFE_NO_PAD.encode(json))
    }

    /// Reads a cursor made by [`Cursor::encode`] for a plan of `members` members.
    pub fn decode(text: &str, members: usize) -> Result<Self, VirtualError> {
        let b64 = text.strip_prefix("v1.").ok_or(VirtualError::Cursor)?;
        let json = URL_SAFE_NO_PAD
            .decode(b64)
            .map_err(|_| VirtualError::Cursor)?;
        let items: Vec<(usize, Option<String>)> =
            serde_json::from_slice(&json).map_err(|_| VirtualError::Cursor)?;
        // At most one entry per member: a cursor cannot make the gateway ask a member more
        // than once per page.
        let repeated = items
            .iter()
            .enumerate()
            .any(|(i, (m, _))| items[..i].iter().any(|(n, _)| n == m));
        if items.is_empty()
            || items.len() > members
            || repeated
            || items.iter().any(|(m, _)| *m >= members)
        {
            return Err(VirtualError::Cursor);
        }
        Ok(Cursor(items))
    }
}
