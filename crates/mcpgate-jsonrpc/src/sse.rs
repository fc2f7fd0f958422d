//! Server-Sent Events framing for messages sent to clients.
//!
//! Only encoding lives here; bytes arriving from upstreams are decoded with the
//! `sse-stream` crate.

use bytes::{BufMut, Bytes, BytesMut};

/// A comment line that keeps idle connections (and the proxies between) open.
pub const KEEP_ALIVE: &[u8] = b": keep-alive\n\n";

/// Encodes one `message` event. `data` is a JSON text; any line breaks in it (pretty
/// printed upstream JSON) become separate `data:` lines, which the client rejoins.
pub fn message_event(id: Option<&str>, data: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(data.len() + 48);
    if let Some(id) = id {
        out.put_slice(b"id: ");
        out.put_slice(id.as_bytes());
        out.put_u8(b'\n');
    }
    out.put_slice(b"event: message\n");
    for line in data.split(|b| *b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        out.put_slice(b"data: ");
        out.put_slice(line);
        out.put_u8(b'\n');
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
    fn multi_line_json_is_split_into_data_lines() {
        assert_eq!(
            &message_event(None, b"{\r\n\"a\":1\n}")[..],
            b"event: message\ndata: {\ndata: \"a\":1\ndata: }\n\n"
        );
    }
}
