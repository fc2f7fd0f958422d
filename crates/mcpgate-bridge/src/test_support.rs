//! What the unit tests of this crate share.

use bytes::Bytes;
use mcpgate_jsonrpc::Message;

/// The message `s` (a test's own JSON: it parses).
#[allow(clippy::unwrap_used)]
pub(crate) fn msg(s: &str) -> Message {
    // ok: a test-only module (`#[cfg(test)]` in lib.rs), parsing a test's own JSON.
    Message::parse(Bytes::from(s.to_owned())).unwrap() // ok: see above
}
