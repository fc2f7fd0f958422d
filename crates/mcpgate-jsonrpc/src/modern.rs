//! MCP 2026-07-28 requests: what a body says about itself (the per-request `_meta`
//! protocol fields, the name it is about) and the check of the headers that mirror it.
//!
//! The spec requires whoever parses the body to check the mirrored headers against it
//! (`basic/transports/streamable-http.mdx`, "Server Validation"): `MCP-Protocol-Version`
//! equals `_meta["io.modelcontextprotocol/protocolVersion"]`, `Mcp-Method` equals `method`,
//! `Mcp-Name` equals `params.name` (`tools/call`, `prompts/get`) or `params.uri`
//! (`resources/read`); values may be sent as `=?base64?…?=`, and optional whitespace around
//! them is not part of the value. A failure is HTTP 400 with JSON-RPC `-32020`; a missing
//! required `_meta` field is 400 / `-32602`; an unsupported version is 400 / `-32022` with
//! `data.supported`. Only the fields named here are parsed; the body is forwarded as it came.

use base64::Engine;
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::error::{HEADER_MISMATCH, INVALID_PARAMS, UNSUPPORTED_VERSION};
use crate::mcp;
use crate::message::Message;
use crate::rpc_error::JsonRpcError;

/// `_meta` key of the request's protocol revision.
pub const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// `_meta` key of the client's capabilities.
pub const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// `_meta` key of the client's name and version.
pub const META_CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
/// `_meta` key of the log level the client wants messages at.
pub const META_LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
/// `_meta` key tagging the messages of a `subscriptions/listen` stream.
pub const META_SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

/// What the body of a 2026-07-28 message says about itself.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Envelope {
    /// `_meta[protocolVersion]`, when present.
    pub version: Option<String>,
    /// Whether `_meta[clientCapabilities]` is present.
    pub has_capabilities: bool,
    /// The name the request is about (`params.name`, `params.uri`, `params.taskId`),
    /// for the methods that mirror one into `Mcp-Name`.
    pub name: Option<String>,
    /// Whether `params._meta` is present at all.
    pub has_meta: bool,
}

#[derive(Deserialize)]
struct Meta<'a> {
    #[serde(borrow, rename = "io.modelcontextprotocol/protocolVersion")]
    version: Option<&'a RawValue>,
    #[serde(borrow, rename = "io.modelcontextprotocol/clientCapabilities")]
    capabilities: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct Params<'a> {
    #[serde(borrow, rename = "_meta")]
    meta: Option<Meta<'a>>,
    #[serde(borrow)]
    name: Option<&'a RawValue>,
    #[serde(borrow)]
    uri: Option<&'a RawValue>,
    #[serde(borrow, rename = "taskId")]
    task_id: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct Outer<'a> {
    #[serde(borrow)]
    params: Option<Params<'a>>,
}

fn raw_str(v: Option<&RawValue>) -> Option<String> {
    serde_json::from_str::<String>(v?.get()).ok()
}

impl Message {
    /// The message's 2026-07-28 envelope (absent fields are `None`/`false`).
    pub fn modern_envelope(&self) -> Envelope {
        let Ok(outer) = serde_json::from_slice::<Outer<'_>>(self.raw()) else {
            return Envelope::default();
        };
        let Some(p) = outer.params else {
            return Envelope::default();
        };
        let name = match self.method().and_then(crate::method::Method::name_field) {
            Some("name") => raw_str(p.name),
            Some("uri") => raw_str(p.uri),
            Some("taskId") => raw_str(p.task_id),
            _ => None,
        };
        Envelope {
            has_meta: p.meta.is_some(),
            version: p.meta.as_ref().and_then(|m| raw_str(m.version)),
            has_capabilities: p.meta.as_ref().is_some_and(|m| m.capabilities.is_some()),
            name,
        }
    }

    /// Whether the body claims the 2026-07-28 era (its `_meta` names a protocol version).
    pub fn claims_modern(&self) -> bool {
        self.modern_envelope()
            .version
            .is_some_and(|v| mcp::is_modern_version(&v))
    }
}

impl Message {
    /// The `subscriptionId` a listen stream's message is tagged with (in `params._meta`
    /// of a notification, `result._meta` of the closing response).
    pub fn subscription_id(&self) -> Option<crate::id::Id> {
        #[derive(Deserialize)]
        struct M<'a> {
            #[serde(borrow, rename = "io.modelcontextprotocol/subscriptionId")]
            id: Option<&'a RawValue>,
        }
        #[derive(Deserialize)]
        struct P<'a> {
            #[serde(borrow, rename = "_meta")]
            meta: Option<M<'a>>,
        }
        #[derive(Deserialize)]
        struct O<'a> {
            #[serde(borrow)]
            params: Option<P<'a>>,
            #[serde(borrow)]
            result: Option<P<'a>>,
        }
        let o: O<'_> = serde_json::from_slice(self.raw()).ok()?;
        let raw = o.params.or(o.result)?.meta?.id?;
        crate::id::Id::from_raw(raw.get()).ok()
    }

    /// The same message tagged with another `subscriptionId` (toward the client, whose
    /// listen request's id the gateway rewrote toward a pipe).
    pub fn with_subscription_id(
        &self,
        id: &crate::id::Id,
    ) -> Result<Message, crate::error::ParseError> {
        use crate::error::ParseError;
        let mut v: serde_json::Value =
            serde_json::from_slice(self.raw()).map_err(ParseError::Json)?;
        let new: serde_json::Value = serde_json::from_str(id.as_raw()).map_err(ParseError::Json)?;
        for key in ["params", "result"] {
            if let Some(meta) = v
                .get_mut(key)
                .and_then(|p| p.get_mut("_meta"))
                .and_then(|m| m.as_object_mut())
                && meta.contains_key(META_SUBSCRIPTION_ID)
            {
                meta.insert(META_SUBSCRIPTION_ID.into(), new.clone());
            }
        }
        let out = serde_json::to_vec(&v).map_err(ParseError::Json)?;
        Message::parse(bytes::Bytes::from(out))
    }
}

/// A header value as the spec defines it: optional whitespace around it removed, and a
/// `=?base64?…?=` value decoded (standard alphabet with padding, UTF-8). A plain value is
/// borrowed, not copied.
pub fn header_value(raw: &[u8]) -> Result<std::borrow::Cow<'_, str>, &'static str> {
    let trimmed = raw
        .iter()
        .position(|b| *b != b' ' && *b != b'\t')
        .map_or(&raw[..0], |start| {
            let end = raw
                .iter()
                .rposition(|b| *b != b' ' && *b != b'\t')
                .unwrap_or(start);
            &raw[start..=end]
        });
    if let Some(inner) = trimmed
        .strip_prefix(b"=?base64?")
        .and_then(|r| r.strip_suffix(b"?="))
    {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(inner)
            .map_err(|_| "a =?base64?…?= value is not valid base64")?;
        return String::from_utf8(bytes)
            .map(std::borrow::Cow::Owned)
            .map_err(|_| "a =?base64?…?= value is not UTF-8");
    }
    if trimmed
        .iter()
        .any(|b| !(b.is_ascii_graphic() || *b == b' ' || *b == b'\t'))
    {
        return Err("a header value has characters that need =?base64?…?=");
    }
    std::str::from_utf8(trimmed)
        .map(std::borrow::Cow::Borrowed)
        .map_err(|_| "a header value is not UTF-8")
}

/// A value as a header carries it (the inverse of [`header_value`]): as it is when every
/// character is visible ASCII, space or tab with no whitespace at either end, else (and
/// for the empty string, and a value that looks like the wrapper itself)
/// `=?base64?…?=` of its UTF-8 bytes.
pub fn encode_header_value(s: &str) -> String {
    let wrapper = s.starts_with("=?base64?") && s.ends_with("?=");
    let safe = !s.is_empty()
        && !wrapper
        && s.bytes()
            .all(|b| b.is_ascii_graphic() || b == b' ' || b == b'\t')
        && !s.starts_with([' ', '\t'])
        && !s.ends_with([' ', '\t']);
    if safe {
        s.to_owned()
    } else {
        format!(
            "=?base64?{}?=",
            base64::engine::general_purpose::STANDARD.encode(s.as_bytes())
        )
    }
}

/// The mirrored headers of one request, raw (each `None` when absent, `Err` when sent
/// more than once).
#[derive(Debug, Clone, Copy, Default)]
pub struct Mirrored<'a> {
    /// `MCP-Protocol-Version`.
    pub version: Option<&'a [u8]>,
    /// `Mcp-Method`.
    pub method: Option<&'a [u8]>,
    /// `Mcp-Name`.
    pub name: Option<&'a [u8]>,
    /// Whether a routing header appeared more than once.
    pub duplicated: Option<&'static str>,
}

fn mismatch(message: String) -> JsonRpcError {
    JsonRpcError::new(HEADER_MISMATCH, format!("Bad Request: {message}"))
}

/// The `-32022` error for a request at a version the gateway does not speak. A request
/// that looks sessionless (a version sorting at or after 2026-07-28) is told the
/// sessionless versions only — what `server/discover` lists as `supportedVersions`, from
/// which a client picks (the conformance suite requires a subset); an older-looking one
/// is told every version mcpgate speaks.
pub fn unsupported_version(requested: &str) -> JsonRpcError {
    let supported: Vec<&str> = mcp::SUPPORTED_PROTOCOL_VERSIONS
        .iter()
        .rev()
        .copied()
        .filter(|v| requested < mcp::MODERN_PROTOCOL_VERSION || mcp::is_modern_version(v))
        .collect();
    unsupported_version_among(requested, &supported)
}

/// The `-32022` error listing `supported` (newest first).
pub fn unsupported_version_among(requested: &str, supported: &[&str]) -> JsonRpcError {
    let data = serde_json::json!({"supported": supported, "requested": requested});
    JsonRpcError::new(UNSUPPORTED_VERSION, "Unsupported protocol version")
        .with_data(data.to_string())
}

/// Checks a 2026-07-28 request's mirrored headers against its body (the order of the
/// checks is the TypeScript SDK's: version, envelope, method, name). Notifications need
/// only a matching `Mcp-Method` when one is sent.
pub fn check(msg: &Message, env: &Envelope, h: &Mirrored<'_>) -> Result<(), JsonRpcError> {
    if let Some(name) = h.duplicated {
        return Err(mismatch(format!(
            "the {name} header appears more than once"
        )));
    }
    check_version(env, h.version, msg.is_request())?;
    if msg.is_request() && !env.has_capabilities {
        let data = serde_json::json!({"envelope": {"key": META_CLIENT_CAPABILITIES, "problem": "missing"}});
        return Err(JsonRpcError::new(
            INVALID_PARAMS,
            format!("Invalid params: {META_CLIENT_CAPABILITIES} is missing from _meta"),
        )
        .with_data(data.to_string()));
    }
    check_method(msg, h.method)?;
    check_name(msg, env, h.name)
}

/// `MCP-Protocol-Version`: present, supported, and (for a request) the body's
/// envelope's version.
fn check_version(
    env: &Envelope,
    header: Option<&[u8]>,
    is_request: bool,
) -> Result<(), JsonRpcError> {
    let version = match header.map(header_value) {
        None => {
            return Err(mismatch(
                "the required MCP-Protocol-Version header is absent".into(),
            ));
        }
        Some(Err(e)) => return Err(mismatch(format!("MCP-Protocol-Version: {e}"))),
        Some(Ok(v)) => v,
    };
    if !mcp::is_supported_version(&version) {
        return Err(unsupported_version(&version));
    }
    match &env.version {
        None if is_request => {
            let missing = if env.has_meta {
                META_PROTOCOL_VERSION
            } else {
                "_meta"
            };
            let data = serde_json::json!({"envelope": {"missing": [missing]}});
            Err(JsonRpcError::new(
                INVALID_PARAMS,
                format!("Invalid params: the request is missing the required per-request envelope key(s): {missing}"),
            )
            .with_data(data.to_string()))
        }
        Some(v) if *v != version => Err(mismatch(format!(
            "MCP-Protocol-Version {version:?} does not match the body's {META_PROTOCOL_VERSION} {v:?}"
        ))),
        _ => Ok(()),
    }
}

/// `Mcp-Method`: present for a request, and the body's method.
fn check_method(msg: &Message, header: Option<&[u8]>) -> Result<(), JsonRpcError> {
    let method = msg.method_name();
    match header.map(header_value) {
        None if msg.is_request() => Err(mismatch(format!(
            "the body carries method {method:?} but the required Mcp-Method header is absent"
        ))),
        None => Ok(()),
        Some(Err(e)) => Err(mismatch(format!("Mcp-Method: {e}"))),
        Some(Ok(m)) if m != method => Err(mismatch(format!(
            "Mcp-Method {m:?} does not match the body's method {method:?}"
        ))),
        Some(Ok(_)) => Ok(()),
    }
}

/// `Mcp-Name`: for a request whose method has a name field, present and the body's.
fn check_name(msg: &Message, env: &Envelope, header: Option<&[u8]>) -> Result<(), JsonRpcError> {
    let Some(field) = msg
        .method()
        .and_then(crate::method::Method::name_field)
        .filter(|_| msg.is_request())
    else {
        return Ok(());
    };
    let body = env.name.as_deref().unwrap_or("");
    match header.map(header_value) {
        None => Err(mismatch(format!(
            "the body carries params.{field}={body:?} but the required Mcp-Name header is absent"
        ))),
        Some(Err(e)) => Err(mismatch(format!("Mcp-Name: {e}"))),
        Some(Ok(n)) if n != body => Err(mismatch(format!(
            "Mcp-Name {n:?} does not match the body's params.{field} {body:?}"
        ))),
        Some(Ok(_)) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn msg(s: &str) -> Message {
        Message::parse(Bytes::copy_from_slice(s.as_bytes())).unwrap()
    }

    const META: &str = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;

    #[test]
    fn header_values_are_encoded_as_the_spec_says() {
        // The spec's examples.
        assert_eq!(
            encode_header_value("Hello, 世界"),
            "=?base64?SGVsbG8sIOS4lueVjA==?="
        );
        assert_eq!(encode_header_value(" padded "), "=?base64?IHBhZGRlZCA=?=");
        assert_eq!(
            encode_header_value("line1\nline2"),
            "=?base64?bGluZTEKbGluZTI=?="
        );
        assert_eq!(
            encode_header_value("=?base64?literal?="),
            "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="
        );
        assert_eq!(encode_header_value("us-west1"), "us-west1");
        assert_eq!(encode_header_value(""), "=?base64??=");
        for s in ["ü-1", "plain", " x", "a\tb"] {
            assert_eq!(
                header_value(encode_header_value(s).as_bytes()).as_deref(),
                Ok(s)
            );
        }
    }

    fn call(name: &str) -> Message {
        msg(&format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":{name:?},"arguments":{{}},{META}}}}}"#
        ))
    }

    fn h<'a>(v: &'a str, m: &'a str, n: Option<&'a str>) -> Mirrored<'a> {
        Mirrored {
            version: Some(v.as_bytes()),
            method: Some(m.as_bytes()),
            name: n.map(str::as_bytes),
            duplicated: None,
        }
    }

    #[test]
    fn subscription_ids_are_read_and_rewritten() {
        let n = msg(
            r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":7}}}"#,
        );
        assert_eq!(n.subscription_id().unwrap().as_raw(), "7");
        let back = n
            .with_subscription_id(&crate::id::Id::from_raw("\"listen:0\"").unwrap())
            .unwrap();
        assert_eq!(back.subscription_id().unwrap().as_raw(), "\"listen:0\"");
        let r = msg(
            r#"{"jsonrpc":"2.0","id":7,"result":{"resultType":"complete","_meta":{"io.modelcontextprotocol/subscriptionId":7}}}"#,
        );
        assert_eq!(r.subscription_id().unwrap().as_raw(), "7");
        assert!(
            msg(r#"{"jsonrpc":"2.0","method":"x"}"#)
                .subscription_id()
                .is_none()
        );
    }

    #[test]
    fn header_values() {
        assert_eq!(header_value(b"  foo \t").unwrap(), "foo");
        assert_eq!(
            header_value(b"=?base64?SGVsbG8sIOS4lueVjA==?=").unwrap(),
            "Hello, \u{4e16}\u{754c}"
        );
        assert_eq!(
            header_value(b"=?base64?IHBhZGRlZCA=?=").unwrap(),
            " padded "
        );
        assert!(header_value(b"=?base64?not base64!?=").is_err());
        assert!(header_value(b"=?base64?/w==?=").is_err(), "not UTF-8");
        assert!(
            header_value(b"caf\xc3\xa9").is_err(),
            "non-ASCII must be base64"
        );
    }

    #[test]
    fn envelope_and_checks() {
        let m = call("echo");
        let env = m.modern_envelope();
        assert_eq!(env.version.as_deref(), Some("2026-07-28"));
        assert!(env.has_capabilities && env.has_meta);
        assert_eq!(env.name.as_deref(), Some("echo"));
        assert!(m.claims_modern());
        assert!(check(&m, &env, &h("2026-07-28", "tools/call", Some("echo"))).is_ok());
        assert!(check(&m, &env, &h("2026-07-28", "tools/call", Some(" echo "))).is_ok());
        assert!(
            check(
                &m,
                &env,
                &h("2026-07-28", "tools/call", Some("=?base64?ZWNobw==?="))
            )
            .is_ok()
        );
        let code = |r: Result<(), JsonRpcError>| r.unwrap_err().code;
        assert_eq!(
            code(check(
                &m,
                &env,
                &h("2026-07-28", "tools/call", Some("other"))
            )),
            -32020
        );
        assert_eq!(
            code(check(&m, &env, &h("2026-07-28", "tools/call", None))),
            -32020
        );
        assert_eq!(
            code(check(
                &m,
                &env,
                &h("2026-07-28", "tools/list", Some("echo"))
            )),
            -32020
        );
        assert_eq!(
            code(check(
                &m,
                &env,
                &h("2026-07-28", "TOOLS/CALL", Some("echo"))
            )),
            -32020
        );
        assert_eq!(
            code(check(
                &m,
                &env,
                &h("2025-11-25", "tools/call", Some("echo"))
            )),
            -32020
        );
        let e = check(&m, &env, &h("1999-01-01", "tools/call", Some("echo"))).unwrap_err();
        assert_eq!(e.code, -32022);
        assert!(e.data.unwrap().contains("\"requested\":\"1999-01-01\""));
        let bare = msg(r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#);
        let e = check(
            &bare,
            &bare.modern_envelope(),
            &h("2026-07-28", "tools/list", None),
        )
        .unwrap_err();
        assert_eq!(e.code, -32602);
        let note =
            msg(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}"#);
        let env = note.modern_envelope();
        let no_method = Mirrored {
            method: None,
            ..h("2026-07-28", "", None)
        };
        assert!(
            check(&note, &env, &no_method).is_ok(),
            "a notification needs no Mcp-Method"
        );
    }
}
