//! The line framing of stdio upstreams: `tokio_util::codec::LinesCodec` with a maximum
//! line length, fed the payload in arbitrary chunks (see `common.rs` for the input
//! layout) through `Decoder::decode` and, at the end, `decode_eof`; decoding goes on after
//! `MaxLineLengthExceeded`, and every line the gateway would keep goes to
//! `Message::parse`.
//!
//! Checks (a failure is a crash):
//! - nothing panics, and decoding ends within a bound on calls (no hang);
//! - no line is longer than the limit or holds a `\n`;
//! - lines and errors do not depend on the chunk boundaries;
//! - `mcpgate-upstream`'s read loop (`FramedRead` + `LinesCodec`, skipping over-long
//!   lines, stopping at an I/O error or the end) hands on the same lines as the codec
//!   does (check `framedread-after-error`).
#![no_main]

#[path = "common.rs"]
mod common;

use std::collections::VecDeque;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes, BytesMut};
use futures::StreamExt;
use libfuzzer_sys::fuzz_target;
use mcpgate_jsonrpc::Message;
use tokio::io::{AsyncRead, ReadBuf};
use tokio_util::codec::{Decoder, FramedRead, LinesCodec, LinesCodecError};

/// The limit used here (the gateway's is configurable; small finds the edges faster).
const MAX_LINE: usize = 1024;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Item {
    Line(String),
    TooLong,
    Io,
}

fuzz_target!(|data: &[u8]| {
    let input = common::Chunked::new(data);
    let chunked = decode_chunks(input.slices());
    let whole = decode_chunks(std::iter::once(input.payload));
    assert_eq!(
        chunked, whole,
        "lines depend on the chunk boundaries {:?}",
        input.chunks
    );

    for item in &chunked {
        if let Item::Line(line) = item {
            assert!(line.len() <= MAX_LINE, "a line of {} bytes", line.len());
            assert!(!line.contains('\n'));
            // What `read_loop` does with a line.
            if !line.trim().is_empty() {
                if let Ok(m) = Message::parse(Bytes::from(line.clone())) {
                    common::exercise(&m);
                }
            }
        }
    }

    if !common::skipped("framedread-after-error") {
        // The gateway's view: over-long lines skipped, the first I/O error ends the stream.
        let mut expected = Vec::new();
        for item in &chunked {
            match item {
                Item::Line(l) => expected.push(l.clone()),
                Item::TooLong => {}
                Item::Io => break,
            }
        }
        let got = read_loop(&input);
        assert_eq!(
            got, expected,
            "the gateway's read loop lost lines after an error (chunks {:?})",
            input.chunks
        );
    }
});

/// The codec alone, as the gateway means it to run: decode after every chunk, go on after
/// any error, `decode_eof` at the end.
fn decode_chunks<'a>(chunks: impl Iterator<Item = &'a [u8]>) -> Vec<Item> {
    let mut codec = LinesCodec::new_with_max_length(MAX_LINE);
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    let mut calls = 0usize;
    let mut fed = 0usize;
    let mut tick = |fed: usize| {
        calls += 1;
        // Each call that does not end a round yields a line or an error, and consumes
        // bytes at least every second call.
        assert!(calls <= 2 * fed + 64, "LinesCodec: {calls} calls for {fed} bytes");
    };
    for chunk in chunks {
        buf.extend_from_slice(chunk);
        fed += chunk.len();
        loop {
            tick(fed);
            match codec.decode(&mut buf) {
                Ok(Some(line)) => out.push(Item::Line(line)),
                Ok(None) => break,
                Err(e) => out.push(classify(e)),
            }
        }
    }
    loop {
        tick(fed);
        match codec.decode_eof(&mut buf) {
            Ok(Some(line)) => out.push(Item::Line(line)),
            Ok(None) => break,
            Err(e) => out.push(classify(e)),
        }
    }
    out
}

fn classify(e: LinesCodecError) -> Item {
    match e {
        LinesCodecError::MaxLineLengthExceeded => Item::TooLong,
        LinesCodecError::Io(e) => {
            let _ = e.to_string();
            Item::Io
        }
    }
}

/// `mcpgate-upstream/src/stdio.rs` `read_loop`, minus the session: the lines it would
/// hand on.
fn read_loop(input: &common::Chunked<'_>) -> Vec<String> {
    let reader = ChunkReader {
        chunks: input.slices().map(Bytes::copy_from_slice).collect(),
        stall: input.has(common::STALL),
        stalled: false,
    };
    let mut lines = FramedRead::new(reader, LinesCodec::new_with_max_length(MAX_LINE));
    let bound = 2 * input.payload.len() + 2 * input.chunks.len() + 64;
    let mut out = Vec::new();
    futures::executor::block_on(async {
        for _ in 0..bound {
            match lines.next().await {
                None => return,
                Some(Err(LinesCodecError::MaxLineLengthExceeded)) => continue,
                Some(Err(LinesCodecError::Io(_))) => return,
                Some(Ok(line)) => out.push(line),
            }
        }
        panic!("FramedRead<LinesCodec> did not end within {bound} items");
    });
    out
}

/// An `AsyncRead` that hands out the chunks in order, like a pipe.
struct ChunkReader {
    chunks: VecDeque<Bytes>,
    /// Return `Pending` once before each chunk.
    stall: bool,
    stalled: bool,
}

impl AsyncRead for ChunkReader {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        while this.chunks.front().is_some_and(Bytes::is_empty) {
            this.chunks.pop_front();
        }
        let Some(front) = this.chunks.front_mut() else {
            return Poll::Ready(Ok(())); // the end
        };
        if this.stall && !this.stalled {
            this.stalled = true;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        let n = front.len().min(buf.remaining());
        buf.put_slice(&front[..n]);
        front.advance(n);
        if front.is_empty() {
            this.chunks.pop_front();
            this.stalled = false;
        }
        Poll::Ready(Ok(()))
    }
}
