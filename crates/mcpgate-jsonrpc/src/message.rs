//! The JSON-RPC envelope: parse only what routing needs, keep the bytes.

use std::borrow::Cow;
use std::fmt;

use bytes::Bytes;
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::error::ParseError;
use crate::id::Id;
use crate::method::Method;

/// What a message is, as far as routing cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// A request: it expects a response with the same id.
    Request {
        /// The request id.
        id: Id,
        /// The method.
        method: Method,
    },
    /// A notification: no id, no response.
    Notification {
        /// The method.
        method: Method,
    },
    /// A response (result or error) to an earlier request.
    Response {
        /// The id of the request this answers (`None` for an error about an unreadable
        /// request, whose id is `null`).
        id: Option<Id>,
    },
}

/// One JSON-RPC message: its parsed envelope plus the exact bytes it arrived as.
#[derive(Clone)]
pub struct Message {
    raw: Bytes,
    kind: Kind,
    /// The SSE event id the upstream gave the event that carried this message, when the
    /// gateway needs it to resume that stream elsewhere (sealed sessions' standalone
    /// streams); transport metadata, not part of the message.
    event_id: Option<std::sync::Arc<str>>,
}

impl fmt::Debug for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Message")
            .field("kind", &self.kind)
            .field("len", &self.raw.len())
            .finish()
    }
}

/// A POST body: one message or (protocol 2025-03-26) a batch.
#[derive(Debug)]
pub enum Incoming {
    /// A single message.
    Single(Message),
    /// A JSON array of messages.
    Batch(Vec<Message>),
}

#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow)]
    jsonrpc: Option<Text<'a>>,
    #[serde(borrow, default, deserialize_with = "present")]
    id: Option<&'a RawValue>,
    #[serde(borrow)]
    method: Option<Text<'a>>,
    #[serde(borrow)]
    params: Option<&'a RawValue>,
    #[serde(borrow)]
    result: Option<&'a RawValue>,
    #[serde(borrow)]
    error: Option<&'a RawValue>,
}

/// A string field borrowed from the message when it has no escapes. (serde borrows a
/// `Cow<str>` field only when it is the field itself, not inside an `Option`: this
/// wrapper makes it the field.)
#[derive(Deserialize)]
struct Text<'a>(#[serde(borrow)] Cow<'a, str>);

/// Keeps a field that is present with the value `null` as `Some("null")`, so that
/// `"id": null` can be told apart from a missing id.
fn present<'de, D>(d: D) -> Result<Option<&'de RawValue>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    <&'de RawValue>::deserialize(d).map(Some)
}

impl Message {
    /// Parses one message from bytes, keeping the bytes.
    pub fn parse(raw: Bytes) -> Result<Self, ParseError> {
        let kind = {
            let env: Envelope<'_> = serde_json::from_slice(&raw).map_err(|e| classify(&raw, e))?;
            kind_of(&env)?
        };
        Ok(Message {
            raw,
            kind,
            event_id: None,
        })
    }

    /// The message, remembering the upstream SSE event id that carried it.
    pub fn with_event_id(mut self, id: std::sync::Arc<str>) -> Self {
        self.event_id = Some(id);
        self
    }

    /// The upstream SSE event id that carried the message, if one was kept.
    pub fn event_id(&self) -> Option<&str> {
        self.event_id.as_deref()
    }

    /// Parses a POST body: a single message or a non-empty batch.
    pub fn parse_incoming(raw: Bytes) -> Result<Incoming, ParseError> {
        let first = raw.iter().find(|b| !b.is_ascii_whitespace());
        if first != Some(&b'[') {
            return Self::parse(raw).map(Incoming::Single);
        }
        let items: Vec<&RawValue> = serde_json::from_slice(&raw).map_err(ParseError::Json)?;
        if items.is_empty() {
            return Err(ParseError::Invalid("empty batch"));
        }
        items
            .into_iter()
            .map(|item| Self::parse(Bytes::copy_from_slice(item.get().as_bytes())))
            .collect::<Result<Vec<_>, _>>()
            .map(Incoming::Batch)
    }

    /// The exact bytes of the message.
    pub fn raw(&self) -> &Bytes {
        &self.raw
    }

    /// Consumes the message, returning its bytes.
    pub fn into_raw(self) -> Bytes {
        self.raw
    }

    /// The envelope.
    pub fn kind(&self) -> &Kind {
        &self.kind
    }

    /// The method, for requests and notifications.
    pub fn method(&self) -> Option<&Method> {
        match &self.kind {
            Kind::Request { method, .. } | Kind::Notification { method } => Some(method),
            Kind::Response { .. } => None,
        }
    }

    /// Whether this is a request or notification of `method`.
    pub fn is(&self, method: &Method) -> bool {
        self.method() == Some(method)
    }

    /// The method's name, for logs (empty for a response).
    pub fn method_name(&self) -> &str {
        self.method().map_or("", Method::as_str)
    }

    /// The id, for requests and responses.
    pub fn id(&self) -> Option<&Id> {
        match &self.kind {
            Kind::Request { id, .. } => Some(id),
            Kind::Response { id } => id.as_ref(),
            Kind::Notification { .. } => None,
        }
    }

    /// Whether this is a request.
    pub fn is_request(&self) -> bool {
        matches!(self.kind, Kind::Request { .. })
    }

    /// Whether this is a response.
    pub fn is_response(&self) -> bool {
        matches!(self.kind, Kind::Response { .. })
    }

    /// The same message with another id (requests and responses only). The envelope is
    /// rebuilt; `params`, `result` and `error` are copied as raw JSON text.
    pub fn with_id(&self, id: &Id) -> Result<Message, ParseError> {
        let env: Envelope<'_> = serde_json::from_slice(&self.raw).map_err(ParseError::Json)?;
        let mut out = String::with_capacity(self.raw.len() + 16);
        out.push_str(r#"{"jsonrpc":"2.0","id":"#);
        out.push_str(id.as_raw());
        let tail = |out: &mut String, key: &str, v: Option<&RawValue>| {
            if let Some(v) = v {
                out.push_str(",\"");
                out.push_str(key);
                out.push_str("\":");
                out.push_str(v.get());
            }
        };
        match &self.kind {
            Kind::Request { method, .. } => {
                out.push_str(",\"method\":");
                out.push_str(&serde_json::to_string(method.as_str()).map_err(ParseError::Json)?);
                tail(&mut out, "params", env.params);
            }
            Kind::Response { .. } => {
                tail(&mut out, "result", env.result);
                tail(&mut out, "error", env.error);
            }
            Kind::Notification { .. } => {
                return Err(ParseError::Invalid("a notification has no id"));
            }
        }
        out.push('}');
        Message::parse(Bytes::from(out))
    }

    /// The progress token this message is about: `params._meta.progressToken` of a
    /// request, or `params.progressToken` of a progress notification. Returned as raw JSON
    /// text (an [`Id`]: strings and integers, as MCP requires).
    pub fn progress_token(&self) -> Option<Id> {
        #[derive(Deserialize)]
        struct Meta<'a> {
            #[serde(borrow, rename = "progressToken")]
            progress_token: Option<&'a RawValue>,
        }
        #[derive(Deserialize)]
        struct Params<'a> {
            #[serde(borrow, rename = "_meta")]
            meta: Option<Meta<'a>>,
            #[serde(borrow, rename = "progressToken")]
            progress_token: Option<&'a RawValue>,
        }
        #[derive(Deserialize)]
        struct Outer<'a> {
            #[serde(borrow)]
            params: Option<Params<'a>>,
        }
        let outer: Outer<'_> = serde_json::from_slice(&self.raw).ok()?;
        let params = outer.params?;
        let token = match &self.kind {
            Kind::Request { .. } => params.meta?.progress_token?,
            Kind::Notification {
                method: Method::Progress,
            } => params.progress_token?,
            _ => return None,
        };
        Id::from_raw(token.get()).ok()
    }

    /// `params.requestId` of a `notifications/cancelled`.
    pub fn cancelled_request_id(&self) -> Option<Id> {
        #[derive(Deserialize)]
        struct Params<'a> {
            #[serde(borrow, rename = "requestId")]
            request_id: Option<&'a RawValue>,
        }
        #[derive(Deserialize)]
        struct Outer<'a> {
            #[serde(borrow)]
            params: Option<Params<'a>>,
        }
        if !self.is(&Method::Cancelled) {
            return None;
        }
        let outer: Outer<'_> = serde_json::from_slice(&self.raw).ok()?;
        Id::from_raw(outer.params?.request_id?.get()).ok()
    }

    /// Replaces `params.requestId` of a `notifications/cancelled` (toward an upstream whose
    /// ids the gateway rewrote). Other params are copied raw.
    pub fn with_cancelled_request_id(&self, id: &Id) -> Result<Message, ParseError> {
        let mut v: serde_json::Value =
            serde_json::from_slice(&self.raw).map_err(ParseError::Json)?;
        let rid = serde_json::from_str(id.as_raw()).map_err(ParseError::Json)?;
        match v.get_mut("params").and_then(|p| p.as_object_mut()) {
            Some(p) => {
                p.insert("requestId".into(), rid);
            }
            None => return Err(ParseError::Invalid("cancellation without params")),
        }
        let out = serde_json::to_vec(&v).map_err(ParseError::Json)?;
        Message::parse(Bytes::from(out))
    }

    /// A string field of `result`, e.g. `protocolVersion` of an initialize result.
    pub fn result_str(&self, field: &str) -> Option<String> {
        #[derive(Deserialize)]
        struct Outer<'a> {
            #[serde(borrow)]
            result: Option<&'a RawValue>,
        }
        let outer: Outer<'_> = serde_json::from_slice(&self.raw).ok()?;
        let result: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(outer.result?.get()).ok()?;
        result.get(field)?.as_str().map(str::to_owned)
    }

    /// A field of `params` as the JSON text it arrived as (e.g. `capabilities` of an
    /// initialize request).
    pub fn params_raw(&self, field: &str) -> Option<String> {
        #[derive(Deserialize)]
        struct Outer<'a> {
            #[serde(borrow)]
            params: Option<std::collections::HashMap<&'a str, &'a RawValue>>,
        }
        let outer: Outer<'_> = serde_json::from_slice(&self.raw).ok()?;
        outer.params?.get(field).map(|v| v.get().to_owned())
    }
}

fn classify(raw: &[u8], e: serde_json::Error) -> ParseError {
    use serde_json::error::Category;
    match e.classify() {
        Category::Data => {
            // Valid JSON of the wrong shape (e.g. a number, or `"method": 5`).
            if serde_json::from_slice::<serde::de::IgnoredAny>(raw).is_ok() {
                ParseError::Invalid("not a JSON-RPC object")
            } else {
                ParseError::Json(e)
            }
        }
        _ => ParseError::Json(e),
    }
}

fn kind_of(env: &Envelope<'_>) -> Result<Kind, ParseError> {
    if env.jsonrpc.as_ref().map(|t| &*t.0) != Some("2.0") {
        return Err(ParseError::Invalid("jsonrpc must be \"2.0\""));
    }
    let id = match env.id {
        Some(raw) if raw.get() == "null" => None,
        Some(raw) => Some(Id::from_raw(raw.get())?),
        None => None,
    };
    match (env.method.as_ref().map(|t| &t.0), id) {
        (Some(m), Some(id)) => Ok(Kind::Request {
            id,
            method: Method::parse(m),
        }),
        (Some(m), None) if env.id.is_none() => Ok(Kind::Notification {
            method: Method::parse(m),
        }),
        (Some(_), None) => Err(ParseError::Invalid("request id must not be null")),
        (None, id) => {
            if env.result.is_some() == env.error.is_some() {
                return Err(ParseError::Invalid(
                    "a response has exactly one of result and error",
                ));
            }
            if id.is_none() && env.result.is_some() {
                return Err(ParseError::Invalid("a result needs an id"));
            }
            Ok(Kind::Response { id })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<Message, ParseError> {
        Message::parse(Bytes::copy_from_slice(s.as_bytes()))
    }

    #[test]
    fn escaped_envelope_strings_are_read_as_their_text() {
        let m = p(r#"{"jsonrpc":"2\u002e0","id":1,"method":"tools\/list"}"#).unwrap();
        assert_eq!(m.method(), Some(&Method::ToolsList));
        assert!(p(r#"{"jsonrpc":"2.1","id":1,"method":"tools/list"}"#).is_err());
    }

    #[test]
    fn kinds() {
        let m = p(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#).unwrap();
        assert_eq!(m.method(), Some(&Method::ToolsList));
        assert_eq!(m.id().unwrap().as_raw(), "1");
        let m = p(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).unwrap();
        assert!(matches!(m.kind(), Kind::Notification { .. }));
        let m = p(r#"{"jsonrpc":"2.0","id":"a\"b","result":{}}"#).unwrap();
        assert_eq!(m.id().unwrap().as_raw(), r#""a\"b""#);
        let m = p(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}"#).unwrap();
        assert_eq!(m.kind(), &Kind::Response { id: None });
    }

    #[test]
    fn rejects() {
        assert!(matches!(p("{"), Err(ParseError::Json(_))));
        assert!(matches!(p("5"), Err(ParseError::Invalid(_))));
        assert!(matches!(
            p(r#"{"id":1,"method":"x"}"#),
            Err(ParseError::Invalid(_))
        ));
        assert!(matches!(
            p(r#"{"jsonrpc":"2.0","id":{},"method":"x"}"#),
            Err(ParseError::Invalid(_))
        ));
        assert!(matches!(
            p(r#"{"jsonrpc":"2.0","id":null,"method":"x"}"#),
            Err(ParseError::Invalid(_))
        ));
        assert!(matches!(
            p(r#"{"jsonrpc":"2.0","id":1}"#),
            Err(ParseError::Invalid(_))
        ));
        assert!(matches!(
            p(r#"{"jsonrpc":"2.0","id":1,"method":5}"#),
            Err(ParseError::Invalid(_))
        ));
    }

    #[test]
    fn with_id_keeps_params_raw() {
        let m =
            p(r#"{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"b": 1.50,"a":[ ]}}"#)
                .unwrap();
        let n = m.with_id(&Id::number(42)).unwrap();
        assert_eq!(
            std::str::from_utf8(n.raw()).unwrap(),
            r#"{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"b": 1.50,"a":[ ]}}"#
        );
        let r = p(r#"{"jsonrpc":"2.0","id":42,"result":{"k":"v"}}"#).unwrap();
        let back = r.with_id(&Id::from_raw("\"x\"").unwrap()).unwrap();
        assert_eq!(
            std::str::from_utf8(back.raw()).unwrap(),
            r#"{"jsonrpc":"2.0","id":"x","result":{"k":"v"}}"#
        );
    }

    #[test]
    fn progress_tokens() {
        let m = p(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"n","_meta":{"progressToken":"t1"}}}"#).unwrap();
        assert_eq!(m.progress_token().unwrap().as_raw(), "\"t1\"");
        let n = p(r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":7,"progress":1}}"#).unwrap();
        assert_eq!(n.progress_token().unwrap().as_raw(), "7");
        let none =
            p(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"n"}}"#).unwrap();
        assert!(none.progress_token().is_none());
    }

    #[test]
    fn cancellation_rewrite() {
        let m = p(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"a","reason":"r"}}"#).unwrap();
        assert_eq!(m.cancelled_request_id().unwrap().as_raw(), "\"a\"");
        let n = m.with_cancelled_request_id(&Id::number(9)).unwrap();
        assert_eq!(n.cancelled_request_id().unwrap().as_raw(), "9");
    }

    #[test]
    fn batches() {
        let b = Message::parse_incoming(Bytes::from_static(
            br#" [{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","method":"b"}]"#,
        ))
        .unwrap();
        assert!(matches!(b, Incoming::Batch(v) if v.len() == 2));
        assert!(Message::parse_incoming(Bytes::from_static(b"[]")).is_err());
    }

    #[test]
    fn result_field() {
        let m = p(r#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18"}}"#).unwrap();
        assert_eq!(
            m.result_str("protocolVersion").as_deref(),
            Some("2025-06-18")
        );
    }
}
