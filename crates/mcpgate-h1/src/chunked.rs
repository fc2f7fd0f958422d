//! The chunked transfer coding (RFC 9112 §7.1): an incremental decoder over a
//! connection's read buffer, and the framing an encoder writes around each chunk.
//!
//! The decoder is strict where leniency has let requests be smuggled past other parsers:
//! every line ends in CRLF (a bare LF or CR is refused), a size has at most 16 hex
//! digits, extensions and trailers are bounded and ignored.

use bytes::{Buf, Bytes, BytesMut};

use crate::error::H1Error;

/// Most bytes of one chunk's extensions.
const MAX_EXTENSION: usize = 4096;
/// Most bytes of the trailer section.
const MAX_TRAILERS: usize = 16 * 1024;

/// What the decoder produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Chunk {
    /// Body bytes.
    Data(Bytes),
    /// The body ended (the last chunk and the trailers were read).
    End,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Reading the size's hex digits (`digits` so far).
    Size { digits: u8 },
    /// After the size: optional whitespace, then `;` extensions, then CR.
    Extension,
    /// The LF of the size line.
    SizeLf,
    /// Inside a chunk's data.
    Data,
    /// The CR after a chunk's data.
    DataCr,
    /// The LF after a chunk's data.
    DataLf,
    /// A trailer line (or the empty line that ends them); `empty` while it has no byte.
    Trailer { empty: bool },
    /// The LF of a trailer line.
    TrailerLf { empty: bool },
    /// Done.
    End,
}

/// Decodes one chunked body.
#[derive(Debug, Clone)]
pub struct ChunkedDecoder {
    state: State,
    /// Bytes of the current chunk's data still to come (or its size while it is read).
    remaining: u64,
    /// Bytes of the current line (extensions) or of the trailers so far.
    seen: usize,
}

impl Default for ChunkedDecoder {
    fn default() -> Self {
        ChunkedDecoder {
            state: State::Size { digits: 0 },
            remaining: 0,
            seen: 0,
        }
    }
}

impl ChunkedDecoder {
    /// Whether the body has ended.
    pub fn is_done(&self) -> bool {
        self.state == State::End
    }

    /// Takes what it can from the front of `buf`. `Ok(None)`: `buf` holds no more of the
    /// body yet (read more).
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Chunk>, H1Error> {
        loop {
            if self.state == State::End {
                return Ok(Some(Chunk::End));
            }
            if self.state == State::Data {
                if buf.is_empty() {
                    return Ok(None);
                }
                let n = usize::try_from(self.remaining)
                    .unwrap_or(usize::MAX)
                    .min(buf.len());
                self.remaining -= n as u64;
                if self.remaining == 0 {
                    self.state = State::DataCr;
                }
                return Ok(Some(Chunk::Data(buf.split_to(n).freeze())));
            }
            let Some(&b) = buf.first() else {
                return Ok(None);
            };
            buf.advance(1);
            self.step(b)?;
        }
    }

    /// One byte of a control part (sizes, line ends, extensions, trailers).
    fn step(&mut self, b: u8) -> Result<(), H1Error> {
        self.state = match (self.state, b) {
            (State::Size { digits }, _) if b.is_ascii_hexdigit() => {
                if digits >= 16 {
                    return Err(H1Error::Chunk);
                }
                let d = u64::from((b as char).to_digit(16).unwrap_or(0));
                self.remaining = (self.remaining << 4) | d;
                State::Size { digits: digits + 1 }
            }
            (State::Size { digits: 0 }, _) => return Err(H1Error::Chunk),
            (State::Size { .. } | State::Extension, b'\r') => State::SizeLf,
            (State::Size { .. }, b' ' | b'\t' | b';') => {
                self.seen = 0;
                State::Extension
            }
            (State::Extension, b'\n') => return Err(H1Error::Chunk),
            (State::Extension, _) if b == b'\t' || (b' '..=b'~').contains(&b) || b >= 0x80 => {
                self.seen += 1;
                if self.seen > MAX_EXTENSION {
                    return Err(H1Error::Chunk);
                }
                State::Extension
            }
            (State::SizeLf, b'\n') if self.remaining == 0 => {
                self.seen = 0;
                State::Trailer { empty: true }
            }
            (State::SizeLf, b'\n') => State::Data,
            (State::DataCr, b'\r') => State::DataLf,
            (State::DataLf, b'\n') => State::Size { digits: 0 },
            (State::Trailer { empty }, b'\r') => State::TrailerLf { empty },
            (State::Trailer { .. }, b'\n') => return Err(H1Error::Chunk),
            (State::Trailer { .. }, _) => {
                self.seen += 1;
                if self.seen > MAX_TRAILERS {
                    return Err(H1Error::Chunk);
                }
                State::Trailer { empty: false }
            }
            (State::TrailerLf { empty: true }, b'\n') => State::End,
            (State::TrailerLf { empty: false }, b'\n') => State::Trailer { empty: true },
            _ => return Err(H1Error::Chunk),
        };
        Ok(())
    }
}

/// The line that opens a chunk of `len` bytes (`{len:x}\r\n`), in a small buffer.
pub fn chunk_size_line(len: usize) -> ([u8; 18], usize) {
    let mut out = [0u8; 18];
    let digits = if len == 0 {
        1
    } else {
        (usize::BITS - len.leading_zeros()).div_ceil(4) as usize
    };
    for (i, slot) in out.iter_mut().take(digits).enumerate() {
        let nibble = (len >> (4 * (digits - 1 - i))) & 0xf;
        *slot = b"0123456789abcdef"[nibble];
    }
    out[digits] = b'\r';
    out[digits + 1] = b'\n';
    (out, digits + 2)
}

/// What follows a chunk's data.
pub const CHUNK_END: &[u8] = b"\r\n";
/// The last chunk with no trailers: the end of a chunked body.
pub const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

#[cfg(test)]
mod tests;
