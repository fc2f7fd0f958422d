//! Header names and values of a parsed head, as an `http::HeaderMap` whose values are
//! slices of the frozen head (no copy) and whose names cost no allocation when they are
//! standard or among the ones MCP traffic carries.

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue};

use crate::error::H1Error;
use crate::field::Field;

/// Names outside `http`'s standard set that MCP requests and answers carry on every
/// exchange: kept as static names so that reading them allocates nothing.
const KNOWN: &[&str] = &[
    "mcp-session-id",
    "mcp-protocol-version",
    "last-event-id",
    "mcp-method",
    "mcp-name",
    "traceparent",
    "tracestate",
    "baggage",
    "keep-alive",
    "x-accel-buffering",
    "x-forwarded-for",
    "x-forwarded-proto",
    "x-forwarded-host",
    "x-real-ip",
    "x-request-id",
];

/// The name `raw` (any case) as a `HeaderName`; `None` when it is not a valid name.
pub fn header_name(raw: &[u8]) -> Option<HeaderName> {
    if let Some(known) = KNOWN
        .iter()
        .find(|k| k.as_bytes().eq_ignore_ascii_case(raw))
    {
        return Some(HeaderName::from_static(known));
    }
    HeaderName::from_bytes(raw).ok()
}

/// The fields of the head in `head` (the frozen bytes they were parsed from) as a header
/// map, in their order (repeated names kept).
pub fn header_map(head: &Bytes, fields: &[Field]) -> Result<HeaderMap, H1Error> {
    let mut map = HeaderMap::with_capacity(fields.len());
    for f in fields {
        let name =
            header_name(f.name(head)).ok_or(H1Error::Malformed(httparse::Error::HeaderName))?;
        let value =
            HeaderValue::from_maybe_shared(head.slice(f.value.0 as usize..f.value.1 as usize))
                .map_err(|_| H1Error::Malformed(httparse::Error::HeaderValue))?;
        map.append(name, value);
    }
    Ok(map)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::request::{Limits, parse_request};

    #[test]
    fn a_map_of_the_head_keeps_order_case_and_repeats() {
        let raw = Bytes::from_static(
            b"POST /mcp HTTP/1.1\r\nHost: x\r\nMcp-Session-Id: s1\r\nX-Custom: a\r\nx-custom: b\r\n\r\n",
        );
        let mut fields = Vec::new();
        parse_request(&raw, &Limits::default(), &mut fields)
            .unwrap()
            .unwrap();
        let map = header_map(&raw, &fields).unwrap();
        assert_eq!(map.get("mcp-session-id").unwrap(), "s1");
        assert_eq!(map.get(http::header::HOST).unwrap(), "x");
        let all: Vec<_> = map.get_all("x-custom").iter().collect();
        assert_eq!(all, ["a", "b"]);
    }

    #[test]
    fn known_names_are_the_static_ones() {
        assert_eq!(
            header_name(b"MCP-Protocol-Version").unwrap(),
            "mcp-protocol-version"
        );
        assert_eq!(
            header_name(b"Content-Type").unwrap(),
            http::header::CONTENT_TYPE
        );
        assert_eq!(header_name(b"x-other").unwrap(), "x-other");
        assert!(header_name(b"bad name").is_none());
    }
}
