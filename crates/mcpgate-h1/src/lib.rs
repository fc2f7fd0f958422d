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
//! - `field.rs`: [`Field`] (a header as spans of its head), [`BodyKind`], [`has_token`].
//! - `error.rs`: [`H1Error`].

mod chunked;
mod date;
mod encode;
mod error;
mod field;
mod names;
mod request;
mod response;

pub use chunked::{CHUNK_END, Chunk, ChunkedDecoder, LAST_CHUNK, chunk_size_line};
pub use date::http_date;
pub use encode::{
    BodyLength, decimal, encode_fields, encode_framing, encode_request_head, encode_request_line,
    encode_response_head, field,
};
pub use error::{Framing, H1Error};
pub use field::{BodyKind, Field, has_token};
pub use names::{header_map, header_name};
pub use request::{Limits, RequestHead, parse_request};
pub use response::{MAX_RESPONSE_HEAD, ResponseHead, parse_response};
