//! `subscriptions/listen` (2026-07-28) on a session-era upstream session: what the client
//! asked for, what the upstream can honour, and its notifications tagged for the stream.

use bytes::Bytes;
use mcpgate_jsonrpc::modern::META_SUBSCRIPTION_ID;
use mcpgate_jsonrpc::{Id, Message, Method};
use serde_json::{Value, json};

/// The notifications a listen stream carries.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListenFilter {
    /// `notifications/tools/list_changed`.
    pub tools: bool,
    /// `notifications/prompts/list_changed`.
    pub prompts: bool,
    /// `notifications/resources/list_changed`.
    pub resources: bool,
    /// `notifications/resources/updated` for these URIs (and what is under them).
    pub uris: Vec<String>,
}

impl ListenFilter {
    /// What the listen request `msg` asks for.
    pub fn asked(msg: &Message) -> ListenFilter {
        let v: Value = serde_json::from_slice(msg.raw()).unwrap_or(Value::Null);
        let n = v.pointer("/params/notifications");
        let flag = |k: &str| n.and_then(|n| n.get(k)).and_then(Value::as_bool) == Some(true);
        ListenFilter {
            tools: flag("toolsListChanged"),
            prompts: flag("promptsListChanged"),
            resources: flag("resourcesListChanged"),
            uris: n
                .and_then(|n| n.get("resourceSubscriptions"))
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default(),
        }
    }

    /// The part of `self` the upstream can honour, by the capabilities in its
    /// `initialize` answer `init` (`listChanged`, `resources.subscribe`).
    pub fn honoured(&self, init: &Message) -> ListenFilter {
        let v: Value = serde_json::from_slice(init.raw()).unwrap_or(Value::Null);
        let cap = |p: &str| v.pointer(p).and_then(Value::as_bool) == Some(true);
        ListenFilter {
            tools: self.tools && cap("/result/capabilities/tools/listChanged"),
            prompts: self.prompts && cap("/result/capabilities/prompts/listChanged"),
            resources: self.resources && cap("/result/capabilities/resources/listChanged"),
            uris: if cap("/result/capabilities/resources/subscribe") {
                self.uris.clone()
            } else {
                Vec::new()
            },
        }
    }

    /// Whether it carries nothing.
    pub fn is_empty(&self) -> bool {
        !self.tools && !self.prompts && !self.resources && self.uris.is_empty()
    }

    fn wants(&self, m: &Message) -> bool {
        match m.method() {
            Some(Method::ToolsListChanged) => self.tools,
            Some(Method::PromptsListChanged) => self.prompts,
            Some(Method::ResourcesListChanged) => self.resources,
            Some(Method::ResourceUpdated) => {
                let v: Value = serde_json::from_slice(m.raw()).unwrap_or(Value::Null);
                let uri = v
                    .pointer("/params/uri")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                self.uris
                    .iter()
                    .any(|u| uri == u || uri.starts_with(&format!("{u}/")))
            }
            _ => false,
        }
    }
}

/// The acknowledgement that opens the stream of the listen request `id`.
pub fn acknowledged(id: &Id, honoured: &ListenFilter) -> Bytes {
    let mut n = serde_json::Map::new();
    for (k, on) in [
        ("toolsListChanged", honoured.tools),
        ("promptsListChanged", honoured.prompts),
        ("resourcesListChanged", honoured.resources),
    ] {
        if on {
            n.insert(k.into(), json!(true));
        }
    }
    if !honoured.uris.is_empty() {
        n.insert("resourceSubscriptions".into(), json!(honoured.uris));
    }
    let out = json!({"jsonrpc": "2.0", "method": Method::Acknowledged.as_str(),
        "params": {"_meta": {META_SUBSCRIPTION_ID: id.to_value()}, "notifications": n}});
    Bytes::from(out.to_string())
}

/// An upstream message for the listen stream `id`: a notification it asked for, tagged
/// with its `subscriptionId`; `None` for anything else.
pub fn for_listener(m: &Message, honoured: &ListenFilter, id: &Id) -> Option<Bytes> {
    if !honoured.wants(m) {
        return None;
    }
    let mut v: Value = serde_json::from_slice(m.raw()).ok()?;
    let params = v
        .as_object_mut()?
        .entry("params")
        .or_insert_with(|| json!({}));
    let meta = params
        .as_object_mut()?
        .entry("_meta")
        .or_insert_with(|| json!({}));
    meta.as_object_mut()?
        .insert(META_SUBSCRIPTION_ID.into(), id.to_value());
    Some(Bytes::from(v.to_string()))
}

/// The response that ends the listen stream `id` from the server's side.
pub fn listen_ended(id: &Id) -> Bytes {
    let result = json!({"resultType": "complete", "_meta": {META_SUBSCRIPTION_ID: id.to_value()}});
    mcpgate_jsonrpc::result_body(Some(id), &result.to_string())
}

/// `resources/subscribe` to `uri` (request id `id`).
pub fn subscribe(id: &str, uri: &str) -> Bytes {
    let out = json!({"jsonrpc": "2.0", "id": id, "method": Method::ResourcesSubscribe.as_str(), "params": {"uri": uri}});
    Bytes::from(out.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::msg;

    #[test]
    fn asked_honoured_acknowledged_and_tagged() {
        let listen = msg(
            r#"{"jsonrpc":"2.0","id":"L1","method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true,"promptsListChanged":true,"resourceSubscriptions":["test://a"]}}}"#,
        );
        let asked = ListenFilter::asked(&listen);
        assert!(asked.tools && asked.prompts && !asked.resources);
        let init = msg(
            r#"{"jsonrpc":"2.0","id":"i","result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true},"resources":{"subscribe":true}}}}"#,
        );
        let h = asked.honoured(&init);
        assert_eq!(
            h,
            ListenFilter {
                tools: true,
                prompts: false,
                resources: false,
                uris: vec!["test://a".into()]
            }
        );
        let id = listen.id().unwrap().clone();
        let ack: Value = serde_json::from_slice(&acknowledged(&id, &h)).unwrap();
        assert_eq!(ack["params"]["_meta"][META_SUBSCRIPTION_ID], "L1");
        assert_eq!(
            ack["params"]["notifications"],
            json!({"toolsListChanged": true, "resourceSubscriptions": ["test://a"]})
        );
        let upd = msg(
            r#"{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"test://a/b"}}"#,
        );
        let tagged: Value = serde_json::from_slice(&for_listener(&upd, &h, &id).unwrap()).unwrap();
        assert_eq!(tagged["params"]["_meta"][META_SUBSCRIPTION_ID], "L1");
        assert_eq!(tagged["params"]["uri"], "test://a/b");
        let other = msg(
            r#"{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"test://ab"}}"#,
        );
        assert!(for_listener(&other, &h, &id).is_none());
        let log = msg(r#"{"jsonrpc":"2.0","method":"notifications/message","params":{}}"#);
        assert!(for_listener(&log, &h, &id).is_none());
        let end: Value = serde_json::from_slice(&listen_ended(&id)).unwrap();
        assert_eq!(end["result"]["_meta"][META_SUBSCRIPTION_ID], "L1");
    }
}
