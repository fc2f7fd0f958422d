//! The SSE decoding of upstream streams: `sse_stream::SseStream::from_bytes_stream` over
//! the payload cut into arbitrary chunks (see `common.rs` for the input layout), each
//! event handled as `mcpgate-upstream`'s `http::decode` does (`id`, `retry`, `event`
//! filter, non-empty `data` → `Message::parse`).
//!
//! Checks (a failure is a crash):
//! - nothing panics, and the stream ends within a bound on polls (no hang);
//! - when no chunking gives an error, the events do not depend on the chunk boundaries
//!   (the same as with the payload in one chunk).
#![no_main]

#[path = "common.rs"]
mod common;

use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use libfuzzer_sys::fuzz_target;
use mcpgate_jsonrpc::Message;
use sse_stream::{Sse, SseStream};

/// `mcpgate-upstream`'s cap on a server's `retry:`.
const MAX_RETRY: Duration = Duration::from_secs(10);

fuzz_target!(|data: &[u8]| {
    let input = common::Chunked::new(data);
    let chunks: Vec<Bytes> = input.slices().map(Bytes::copy_from_slice).collect();
    let chunked = run(chunks, input.has(common::BODY_ERROR));
    let whole = run(vec![Bytes::copy_from_slice(input.payload)], false);

    for ev in chunked.events.iter().chain(&whole.events) {
        decode(ev);
    }
    if chunked.errors == 0 && whole.errors == 0 && !input.has(common::BODY_ERROR) {
        assert_eq!(
            chunked.events, whole.events,
            "the events depend on the chunk boundaries {:?}",
            input.chunks
        );
    }
});

struct Outcome {
    events: Vec<Sse>,
    errors: usize,
}

/// Drives the decoder to its end, past errors (the gateway stops at the first one; going
/// on reaches more states).
fn run(chunks: Vec<Bytes>, body_error: bool) -> Outcome {
    let bytes: usize = chunks.iter().map(Bytes::len).sum();
    let n = chunks.len();
    let mut items: Vec<Result<Bytes, std::io::Error>> = chunks.into_iter().map(Ok).collect();
    if body_error {
        items.push(Err(std::io::Error::other("connection reset")));
    }
    let mut stream = SseStream::from_bytes_stream(futures::stream::iter(items));
    // Every item is an event (at least one byte each) or an error (at most one per
    // chunk), so this bounds a decoder that makes progress.
    let bound = bytes + n + 4;
    let mut out = Outcome {
        events: Vec::new(),
        errors: 0,
    };
    futures::executor::block_on(async {
        for _ in 0..bound {
            match stream.next().await {
                None => return,
                Some(Ok(ev)) => out.events.push(ev),
                Some(Err(e)) => {
                    let _ = e.to_string();
                    out.errors += 1;
                }
            }
        }
        panic!("the SSE decoder yielded more than {bound} items from {bytes} bytes");
    });
    out
}

/// What `mcpgate-upstream/src/http.rs` `decode` does with one event.
fn decode(ev: &Sse) {
    if let Some(ms) = ev.retry {
        let _ = Duration::from_millis(ms).min(MAX_RETRY);
    }
    if ev.event.as_deref().is_some_and(|e| e != "message") {
        return;
    }
    let Some(data) = ev.data.clone().filter(|d| !d.is_empty()) else {
        return;
    };
    if let Ok(m) = Message::parse(Bytes::from(data)) {
        common::exercise(&m);
    }
}
