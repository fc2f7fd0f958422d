//! # mcpgate-h1
//!
//! HTTP/1.1 on the wire, for both of the gateway's hops: a client's request and an
//! upstream's response parsed (with `httparse`) under strict framing rules, heads encoded
//! straight into a connection's write buffer, the chunked transfer coding both ways, and
//! the `Date` header. It owns no socket and knows nothing of MCP; the front
//! (`mcpgate-server`) and the upstream transport (`mcpgate-upstream`) drive their
//! connections with it.
//!
//! Why not hyper on these two hops: a proxied request through hyper costs a header map,
//! a body channel and several wake-ups per side; here a head is parsed in place, its
//! values are slices of the connection's read buffer, and nothing is allocated per
//! request once a connection's buffers have grown.
//!
//! ## Framing (request smuggling)
//! One rule decides where a message ends, and anything ambiguous is refused (the request
//! gets `400` and its connection is closed) — RFC 9112 §6.3:
//! - `Transfer-Encoding` with `Content-Length`: refused;
//! - `Transfer-Encoding` other than exactly `chunked` (`chunked, identity`, `gzip`, an
//!   empty list, several headers), or on an HTTP/1.0 request: refused;
//! - several `Content-Length` values that differ, or one that is not a plain decimal:
//!   refused (equal repeats are one length, as RFC 9110 §8.6 allows);
//! - obs-fold, a space before the colon, a NUL or other control byte in a header:
//!   refused by `httparse`;
//! - a head larger than [`Limits::max_head`] or with more than [`Limits::max_headers`]
//!   fields: `431`.
//!
//! ## Layout
//! - `request.rs`: [`parse_request`], the request head and its framing.
//! - `response.rs`: [`parse_response`], an upstream's response head and its framing.
//! - `names.rs`: header names and values as slices of a frozen buffer (no copy, and no
//!   allocation for the names the gateway reads).
//! - `chunked.rs`: [`ChunkedDecoder`] and the chunk framing of an encoded body.
//! - `encode.rs`: response and request heads written into a buffer.
//! - `date.rs`: the `Date` header's value, formatted once per second per thread.
//! - `error.rs`: [`H1Error`].

mod chunked;
mod date;
mod encode;
mod error;
mod names;
mod request;
mod response;

pub use chunked::{CHUNK_END, Chunk, ChunkedDecoder, LAST_CHUNK, chunk_size_line};
pub use date::http_date;
pub use encode::{
    BodyLength, decimal, encode_fields, encode_framing, encode_request_head, encode_response_head,
    field,
};
pub use error::{Framing, H1Error};
pub use names::{header_map, header_name};
pub use request::{Limits, RequestHead, parse_request};
pub use response::{MAX_RESPONSE_HEAD, ResponseHead, parse_response};

/// Where a message body ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyKind {
    /// No body.
    Empty,
    /// Exactly this many bytes.
    Length(u64),
    /// The chunked transfer coding.
    Chunked,
    /// Until the connection closes (a response only).
    UntilClose,
}

/// A header field of a parsed head: its name and value as ranges of the head's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    /// The name's bytes.
    pub name: (u32, u32),
    /// The value's bytes.
    pub value: (u32, u32),
}

impl Field {
    fn of(base: &[u8], h: &httparse::Header<'_>) -> Field {
        Field {
            name: span(base, h.name.as_bytes()),
            value: span(base, h.value),
        }
    }

    /// The name, in `head` (the bytes the head was parsed from).
    pub fn name<'a>(&self, head: &'a [u8]) -> &'a [u8] {
        &head[self.name.0 as usize..self.name.1 as usize]
    }

    /// The value, in `head`.
    pub fn value<'a>(&self, head: &'a [u8]) -> &'a [u8] {
        &head[self.value.0 as usize..self.value.1 as usize]
    }
}

/// The range `part` takes in `base` (it is a sub-slice of it).
fn span(base: &[u8], part: &[u8]) -> (u32, u32) {
    let start = (part.as_ptr() as usize).saturating_sub(base.as_ptr() as usize);
    let end = start + part.len();
    (
        u32::try_from(start).unwrap_or(u32::MAX),
        u32::try_from(end).unwrap_or(u32::MAX),
    )
}

/// Whether a comma-separated header value lists `token` (case-insensitively).
pub fn has_token(value: &[u8], token: &str) -> bool {
    value
        .split(|b| *b == b',')
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(token.as_bytes()))
}
