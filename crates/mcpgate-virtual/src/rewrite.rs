//! Edits of one field of a message's params, and what a member's message becomes on its
//! way to the client (and the client's answer on its way back).

use std::borrow::Cow;
use std::collections::BTreeMap;

use bytes::Bytes;
use mcpgate_jsonrpc::{Id, Message, Method};
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::error::VirtualError;
use crate::names::{tag_id, untag_id};
use crate::plan::Plan;

#[derive(Deserialize)]
struct Env<'a> {
    #[serde(borrow)]
    id: Option<&'a RawValue>,
    #[serde(borrow)]
    method: Option<Cow<'a, str>>,
    #[serde(borrow)]
    params: Option<BTreeMap<Cow<'a, str>, &'a RawValue>>,
}

/// A request's or notification's envelope, its params kept as raw JSON, read once: a
/// routed call reads its name and sends the message on with the member's own name from
/// one parse.
pub struct Params<'a> {
    env: Env<'a>,
    len: usize,
}

impl<'a> Params<'a> {
    /// Reads `msg`'s envelope and params.
    pub fn parse(msg: &'a Message) -> Result<Self, VirtualError> {
        let env: Env<'a> = serde_json::from_slice(msg.raw())?;
        Ok(Params {
            env,
            len: msg.raw().len(),
        })
    }

    /// A string param (`params.name`, `params.uri`).
    pub fn str(&self, key: &str) -> Option<String> {
        let raw = self.env.params.as_ref()?.get(key)?;
        serde_json::from_str::<String>(raw.get()).ok()
    }

    /// The message with `params[key]` set to `value`; the other params go as their raw
    /// JSON text (a tool call's arguments are not parsed).
    pub fn with(&self, key: &str, value: &Value) -> Result<Message, VirtualError> {
        let method = self
            .env
            .method
            .as_deref()
            .ok_or(VirtualError::NotARequest)?;
        let value = value.to_string();
        let mut out = String::with_capacity(self.len + value.len() + 16);
        out.push_str(r#"{"jsonrpc":"2.0""#);
        if let Some(id) = self.env.id {
            out.push_str(r#","id":"#);
            out.push_str(id.get());
        }
        out.push_str(r#","method":"#);
        out.push_str(&serde_json::to_string(method)?);
        out.push_str(r#","params":{"#);
        let mut first = true;
        let mut field = |out: &mut String, k: &str, v: &str| -> Result<(), VirtualError> {
            if !first {
                out.push(',');
            }
            first = false;
            out.push_str(&serde_json::to_string(k)?);
            out.push(':');
            out.push_str(v);
            Ok(())
        };
        for (k, v) in self.env.params.iter().flatten() {
            if k != key {
                field(&mut out, k, v.get())?;
            }
        }
        field(&mut out, key, &value)?;
        out.push_str("}}");
        Ok(Message::parse(Bytes::from(out))?)
    }
}

/// A string in the request's or notification's params (`params.name`, `params.uri`).
pub fn param_str(msg: &Message, key: &str) -> Option<String> {
    Params::parse(msg).ok()?.str(key)
}

/// The params object as a value (for the methods whose params are more than a name).
pub fn params(msg: &Message) -> Option<Value> {
    #[derive(Deserialize)]
    struct P {
        params: Option<Value>,
    }
    serde_json::from_slice::<P>(msg.raw()).ok()?.params
}

/// The request or notification with `params[key]` set to `value` (see [`Params::with`]).
pub fn with_param(msg: &Message, key: &str, value: &Value) -> Result<Message, VirtualError> {
    Params::parse(msg)?.with(key, value)
}

/// The request or notification with its params replaced by `params`.
pub fn with_params(msg: &Message, params: &Value) -> Result<Message, VirtualError> {
    let mut v: Value = serde_json::from_slice(msg.raw())?;
    if let Some(o) = v.as_object_mut() {
        o.insert("params".into(), params.clone());
    }
    Ok(Message::parse(Bytes::from(v.to_string()))?)
}

/// A response with `result` as its result and `id` as its id.
pub fn result(id: &Id, result: &Value) -> Result<Message, VirtualError> {
    let body = mcpgate_jsonrpc::result_body(Some(id), &result.to_string());
    Ok(Message::parse(body)?)
}

/// An error response.
pub fn error(id: &Id, code: i64, message: &str) -> Result<Message, VirtualError> {
    let body = mcpgate_jsonrpc::JsonRpcError::new(code, message).to_body(Some(id));
    Ok(Message::parse(body)?)
}

/// What member `member`'s message (a request for the client, or a notification) becomes
/// toward the client: a request's id is tagged with the member; `resources/updated`
/// carries the exposed URI; a `notifications/cancelled` of one of the member's own
/// requests names its tagged id. Anything else goes as it came.
pub fn from_member(plan: &Plan, member: usize, msg: Message) -> Message {
    if msg.is_request() {
        return match msg.id() {
            Some(id) => msg.with_id(&tag_id(member, id)).unwrap_or(msg),
            None => msg,
        };
    }
    match msg.method() {
        Some(Method::ResourceUpdated) => match param_str(&msg, "uri") {
            Some(uri) => {
                let exposed = Value::String(plan.expose_uri(member, &uri));
                with_param(&msg, "uri", &exposed).unwrap_or(msg)
            }
            None => msg,
        },
        Some(Method::Cancelled) => match msg.cancelled_request_id() {
            Some(id) => msg
                .with_cancelled_request_id(&tag_id(member, &id))
                .unwrap_or(msg),
            None => msg,
        },
        _ => msg,
    }
}

/// The member a client's response is for, and the response with the member's own id;
/// `None` when its id is not one the gateway tagged.
pub fn to_member(msg: &Message) -> Option<(usize, Message)> {
    let (member, own) = untag_id(msg.id()?)?;
    let out = msg.with_id(&own).ok()?;
    Some((member, out))
}

/// A `resources/read` result with every `contents[].uri` exposed.
pub fn read_result(plan: &Plan, member: usize, msg: Message) -> Message {
    let Ok(mut v) = serde_json::from_slice::<Value>(msg.raw()) else {
        return msg;
    };
    let Some(contents) = v
        .pointer_mut("/result/contents")
        .and_then(Value::as_array_mut)
    else {
        return msg;
    };
    for c in contents {
        if let Some(uri) = c.get("uri").and_then(Value::as_str) {
            let exposed = plan.expose_uri(member, uri);
            c["uri"] = Value::String(exposed);
        }
    }
    Message::parse(Bytes::from(v.to_string())).unwrap_or(msg)
}
