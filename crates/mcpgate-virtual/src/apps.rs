//! The URIs a tool names for the client beyond its listing's own field: an MCP App's
//! `ui://` resource in the tool's `_meta` (and in a call result's), and the resources a
//! result embeds or links. Each is exposed the way the catalogue exposes the member's
//! resources, so what a tool names is what the client can read.

use bytes::Bytes;
use mcpgate_jsonrpc::Message;
use serde_json::Value;

use crate::names::UI_SCHEME;
use crate::plan::Plan;

/// The `_meta` key of the older, flat form of a tool's app resource.
const FLAT_KEY: &str = "ui/resourceUri";

/// Whether `uri` is an MCP App's resource.
pub fn is_app(uri: &str) -> bool {
    uri.starts_with(UI_SCHEME)
}

/// Exposes the app resource URIs in an object's `_meta` (`ui.resourceUri` and the older
/// `ui/resourceUri`): a tool listing's entry, or a call's result.
pub fn expose_meta(plan: &Plan, member: usize, holder: &mut Value) {
    let Some(meta) = holder.get_mut("_meta").and_then(Value::as_object_mut) else {
        return;
    };
    if let Some(uri) = meta.get_mut(FLAT_KEY) {
        expose(plan, member, uri);
    }
    if let Some(uri) = meta.get_mut("ui").and_then(|ui| ui.get_mut("resourceUri")) {
        expose(plan, member, uri);
    }
}

/// A `tools/call` result with the URIs it names exposed: its `_meta`'s app resource,
/// each `resource_link`'s `uri` and each embedded `resource`'s `uri`. A result that
/// names no URI (no `uri"` in its text) is passed on unparsed.
pub fn call_result(plan: &Plan, member: usize, msg: Message) -> Message {
    if memchr::memmem::find(msg.raw(), b"uri\"").is_none() {
        return msg;
    }
    let Ok(mut v) = serde_json::from_slice::<Value>(msg.raw()) else {
        return msg;
    };
    let Some(result) = v.get_mut("result") else {
        return msg;
    };
    expose_meta(plan, member, result);
    let content = result.get_mut("content").and_then(Value::as_array_mut);
    for c in content.into_iter().flatten() {
        let uri = match c.get("type").and_then(Value::as_str) {
            Some("resource_link") => c.get_mut("uri"),
            Some("resource") => c.get_mut("resource").and_then(|r| r.get_mut("uri")),
            _ => None,
        };
        if let Some(uri) = uri {
            expose(plan, member, uri);
        }
    }
    Message::parse(Bytes::from(v.to_string())).unwrap_or(msg)
}

fn expose(plan: &Plan, member: usize, uri: &mut Value) {
    if let Some(own) = uri.as_str() {
        *uri = Value::String(plan.expose_uri(member, own));
    }
}
