//! Helpers shared by the fuzz targets (included with `#[path]`, not a crate).
//!
//! ## Chunked inputs (`sse_decoder`, `stdio_framer`)
//!
//! The first bytes of the input say how the rest (the payload) is cut into the chunks a
//! socket or pipe would deliver:
//!
//! - byte 0: low nibble `k` = how many chunk-length bytes follow; high nibble = flags
//!   ([`STALL`], [`BODY_ERROR`]);
//! - bytes 1..=k: chunk lengths, 0–255 (0 is an empty chunk);
//! - the rest is the payload; the chunks are cut from it in order (each clamped to what is
//!   left), and whatever remains is the last chunk.
//!
//! An input starting with `\x00` is therefore the payload in one chunk.
#![allow(dead_code)]

use std::ops::Range;
use std::sync::OnceLock;

/// Flag: the reader returns `Pending` once before each chunk (as a pipe or socket does).
pub const STALL: u8 = 0x1;
/// Flag: the byte stream ends with an I/O error instead of a clean end.
pub const BODY_ERROR: u8 = 0x2;

/// A payload and the chunks it is cut into.
pub struct Chunked<'a> {
    /// The high nibble of the first byte.
    pub flags: u8,
    /// The bytes after the header.
    pub payload: &'a [u8],
    /// Consecutive ranges of `payload` covering all of it (some may be empty).
    pub chunks: Vec<Range<usize>>,
}

impl<'a> Chunked<'a> {
    /// Decodes the header described in the module docs.
    pub fn new(data: &'a [u8]) -> Self {
        let Some((&first, rest)) = data.split_first() else {
            return Chunked {
                flags: 0,
                payload: &[],
                chunks: vec![0..0],
            };
        };
        let k = usize::from(first & 0x0F).min(rest.len());
        let (lens, payload) = rest.split_at(k);
        let mut chunks = Vec::with_capacity(k + 1);
        let mut at = 0;
        for &len in lens {
            let end = (at + usize::from(len)).min(payload.len());
            chunks.push(at..end);
            at = end;
        }
        chunks.push(at..payload.len());
        Chunked {
            flags: first >> 4,
            payload,
            chunks,
        }
    }

    /// The chunks as slices.
    pub fn slices(&self) -> impl Iterator<Item = &'a [u8]> + '_ {
        self.chunks.iter().map(|r| &self.payload[r.clone()])
    }

    /// Whether a flag is set.
    pub fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }
}

/// Whether the check `name` is switched off by `MCPGATE_FUZZ_SKIP` (a comma-separated
/// list of check names), for a known, reported bug that would otherwise stop the fuzzer on
/// its first input. Read once per process.
pub fn skipped(name: &str) -> bool {
    static SKIP: OnceLock<Vec<String>> = OnceLock::new();
    SKIP.get_or_init(|| {
        std::env::var("MCPGATE_FUZZ_SKIP")
            .unwrap_or_default()
            .split(',')
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
            .collect()
    })
    .iter()
    .any(|s| s == name || s == "all")
}

/// Exercises every read-only accessor of a parsed message (none may panic) and checks
/// the invariants that hold for any message.
pub fn exercise(m: &mcpgate_jsonrpc::Message) {
    use mcpgate_jsonrpc::{Id, Kind};
    let _ = m.raw();
    let _ = m.progress_token();
    let _ = m.cancelled_request_id();
    let _ = m.result_str("protocolVersion");
    match m.kind() {
        Kind::Request { id, method } => {
            assert!(m.is_request() && !m.is_response());
            assert_eq!(m.method(), Some(method));
            assert_eq!(m.id(), Some(id));
        }
        Kind::Notification { method } => {
            assert!(!m.is_request() && !m.is_response());
            assert_eq!(m.method(), Some(method));
            assert_eq!(m.id(), None);
        }
        Kind::Response { id } => {
            assert!(m.is_response() && !m.is_request());
            assert_eq!(m.method(), None);
            assert_eq!(m.id(), id.as_ref());
        }
    }
    if let Some(id) = m.id() {
        // An id's raw text is an id again, the same one.
        let again = Id::from_raw(id.as_raw()).expect("an accepted id re-parses");
        assert_eq!(&again, id);
    }
}
