//! Server-Sent Events framing for messages sent to clients.
//!
//! Only encoding lives here; bytes arriving from upstreams are decoded with the
//! `sse-stream` crate.

use bytes::{BufMut, Bytes, BytesMut};

/// A comment line that keeps idle connections (and the proxies between) open.
pub const KEEP_ALIVE: &[u8] = b": keep-alive\n\n";

/// Encodes one `message` event. `data` is a JSON text; any line breaks in it (pretty
/// printed upstream JSON) become separate `data:` lines, which the client rejoins. SSE
/// ends a line at CRLF, LF or a lone CR, so each of the three starts a new `data:` line: a
/// lone CR (JSON whitespace) left inside a `data:` line would cut the event at the client.
pub fn message_event(id: Option<&str>, data: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(data.len() + 48);
    if let Some(id) = id {
        out.put_slice(b"id: ");
        out.put_slice(id.as_bytes());
        out.put_u8(b'\n');
    }
    out.put_slice(b"event: message\n");
    let mut rest = data;
    loop {
        let end = rest.iter().position(|b| *b == b'\n' || *b == b'\r');
        out.put_slice(b"data: ");
        out.put_slice(&rest[..end.unwrap_or(rest.len())]);
        out.put_u8(b'\n');
        let Some(i) = end else { break };
        let crlf = rest[i] == b'\r' && rest.get(i + 1) == Some(&b'\n');
        rest = &rest[i + if crlf { 2 } else { 1 }..];
    }
    out.put_u8(b'\n');
    out.freeze()
}

/// Encodes an event with a custom `event:` name (e.g. the legacy transport's `endpoint`).
pub fn named_event(event: &str, data: &str) -> Bytes {
    Bytes::from(format!("event: {event}\ndata: {data}\n\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_line() {
        assert_eq!(
            &message_event(Some("7"), b"{\"a\":1}")[..],
            b"id: 7\nevent: message\ndata: {\"a\":1}\n\n"
        );
    }

    #[test]
    fn a_bare_carriage_return_starts_a_new_data_line() {
        // JSON allows a lone CR as whitespace; SSE ends a line there, so it must not stay
        // inside a `data:` line. Found by fuzz target jsonrpc_envelope (sse-roundtrip).
        assert_eq!(
            &message_event(Some("1:2"), b"{\"jsonrpc\":\"2.0\",\r\"method\":\"x\"}")[..],
            b"id: 1:2\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\ndata: \"method\":\"x\"}\n\n"
        );
        assert_eq!(
            &message_event(None, b"{}\r\r\n")[..],
            b"event: message\ndata: {}\ndata: \ndata: \n\n"
        );
    }

    #[test]
    fn multi_line_json_is_split_into_data_lines() {
        assert_eq!(
            &message_event(None, b"{\r\n\"a\":1\n}")[..],
            b"event: message\ndata: {\ndata: \"a\":1\ndata: }\n\n"
        );
    }
}
