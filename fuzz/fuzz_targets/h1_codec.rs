//! The gateway's HTTP/1.1 codec (`mcpgate-h1`) on both hops: a request head as the front
//! parses it, a response head as the upstream transport parses it, and the chunked
//! decoder fed the payload cut into chunks (see `common.rs` for the input layout).
//!
//! Checks (a failure is a crash):
//! - nothing panics;
//! - a head parses to the same result whether it arrives whole or growing chunk by chunk
//!   (the drivers re-parse as bytes arrive): incomplete until its end, then the same head
//!   or the same refusal;
//! - an accepted head's framing is never ambiguous: `Content-Length` with
//!   `Transfer-Encoding` is never accepted, and a chunked request is HTTP/1.1;
//! - every field span lies inside the head;
//! - the chunked decoder's output does not depend on the chunk boundaries, never holds
//!   more bytes than came in, and makes progress (a bound on calls).
#![no_main]

#[path = "common.rs"]
mod common;

use bytes::{Bytes, BytesMut};
use libfuzzer_sys::fuzz_target;
use mcpgate_h1::{BodyKind, Chunk, ChunkedDecoder, Limits, parse_request, parse_response};

fuzz_target!(|data: &[u8]| {
    let input = common::Chunked::new(data);
    let payload = input.payload;
    request(payload, &input);
    response(payload, &input);
    chunked(&input);
});

/// The prefixes the driver would parse: each chunk boundary, then the whole payload.
fn prefixes<'a>(input: &'a common::Chunked<'a>) -> impl Iterator<Item = &'a [u8]> + 'a {
    input.chunks.iter().map(|r| &input.payload[..r.end])
}

fn request(payload: &[u8], input: &common::Chunked<'_>) {
    let limits = Limits::default();
    let mut fields = Vec::new();
    let whole = parse_request(payload, &limits, &mut fields);
    if let Ok(Some(h)) = &whole {
        let text = String::from_utf8_lossy(&payload[..h.len]).to_ascii_lowercase();
        assert!(
            !(text.contains("\ncontent-length") && text.contains("\ntransfer-encoding")),
            "a request with both framing fields was accepted: {text:?}"
        );
        if h.body == BodyKind::Chunked {
            assert_eq!(h.version, http::Version::HTTP_11, "chunked on HTTP/1.0");
        }
        for f in &fields {
            assert!(f.name.1 as usize <= h.len && f.value.1 as usize <= h.len);
        }
    }
    let whole = whole.map(|h| h.map(|h| (h.len, h.body))).map_err(|e| e.to_string());
    for p in prefixes(input) {
        let part = parse_request(p, &limits, &mut fields)
            .map(|h| h.map(|h| (h.len, h.body)))
            .map_err(|e| e.to_string());
        match (&part, &whole) {
            // Not complete yet: the driver reads on.
            (Ok(None), _) => {}
            // Complete (or refused) at a prefix: the same as with every byte.
            _ => {
                assert_eq!(part, whole, "the head's parse depends on where the bytes were cut");
                break;
            }
        }
    }
}

fn response(payload: &[u8], input: &common::Chunked<'_>) {
    let mut fields = Vec::new();
    for to_head in [false, true] {
        let whole = parse_response(payload, to_head, &mut fields);
        if let Ok(Some(h)) = &whole {
            for f in &fields {
                assert!(f.name.1 as usize <= h.len && f.value.1 as usize <= h.len);
            }
            if to_head {
                assert_eq!(h.body, BodyKind::Empty, "an answer to HEAD has no body");
            }
        }
        let whole = whole
            .map(|h| h.map(|h| (h.len, h.status, h.body, h.close)))
            .map_err(|e| e.to_string());
        for p in prefixes(input) {
            let part = parse_response(p, to_head, &mut fields)
                .map(|h| h.map(|h| (h.len, h.status, h.body, h.close)))
                .map_err(|e| e.to_string());
            if part != Ok(None) {
                assert_eq!(part, whole, "the head's parse depends on where the bytes were cut");
                break;
            }
        }
    }
}

/// Decodes the payload fed chunk by chunk and fed whole; returns data and outcome.
fn decode(slices: impl Iterator<Item = Bytes>) -> (Vec<u8>, Result<bool, String>) {
    let mut d = ChunkedDecoder::default();
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    let mut fed = 0usize;
    for s in slices {
        fed += s.len();
        buf.extend_from_slice(&s);
        // Each call takes at least one byte or says it needs more: bounded by the bytes.
        for _ in 0..=buf.len() + 2 {
            match d.decode(&mut buf) {
                Ok(Some(Chunk::Data(b))) => {
                    assert!(!b.is_empty(), "an empty data chunk");
                    out.extend_from_slice(&b);
                    assert!(out.len() <= fed, "more body than bytes");
                }
                Ok(Some(Chunk::End)) => return (out, Ok(true)),
                Ok(None) => break,
                Err(e) => return (out, Err(e.to_string())),
            }
        }
    }
    (out, Ok(false))
}

fn chunked(input: &common::Chunked<'_>) {
    let cut = decode(input.slices().map(Bytes::copy_from_slice));
    let whole = decode(std::iter::once(Bytes::copy_from_slice(input.payload)));
    match (&cut.1, &whole.1) {
        (Ok(true), _) | (_, Ok(true)) => assert_eq!(cut, whole, "the body depends on the cuts"),
        (Err(a), Err(b)) => assert_eq!(a, b, "the refusal depends on the cuts"),
        // Fed whole it may get further than a cut that ends mid-body; the data agrees
        // as far as both went.
        _ => {
            let n = cut.0.len().min(whole.0.len());
            assert_eq!(cut.0[..n], whole.0[..n], "the body depends on the cuts");
        }
    }
}
