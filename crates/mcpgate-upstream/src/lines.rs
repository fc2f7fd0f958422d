//! Line framing for stdio children: `LinesCodec` whose per-line problems are items.
//!
//! `FramedRead` ends its stream after any decoder error (it yields `None` next), so a
//! plain `LinesCodec` ends the reader at the first over-long or non-UTF-8 line: the
//! session closed with "stdout closed", and a stopped stderr reader closed the pipe under
//! the child. Here both are items, and the reader goes on with the next line.

use bytes::BytesMut;
use tokio_util::codec::{Decoder, LinesCodec, LinesCodecError};

/// One line from a child.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    /// A complete line, without its `\n` or `\r\n`.
    Text(String),
    /// A line longer than the limit; its bytes were skipped.
    TooLong,
    /// A line that is not UTF-8; its bytes were skipped.
    NotUtf8,
}

/// A `LinesCodec` with a maximum line length that never fails on a line's content.
#[derive(Debug)]
pub struct LineCodec(LinesCodec);

impl LineCodec {
    /// Lines of at most `max` bytes (without the line break).
    pub fn new(max: usize) -> Self {
        LineCodec(LinesCodec::new_with_max_length(max))
    }
}

impl Decoder for LineCodec {
    type Item = Line;
    type Error = std::io::Error;

    fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Line>, std::io::Error> {
        lift(self.0.decode(buf))
    }

    fn decode_eof(&mut self, buf: &mut BytesMut) -> Result<Option<Line>, std::io::Error> {
        lift(self.0.decode_eof(buf))
    }
}

fn lift(r: Result<Option<String>, LinesCodecError>) -> Result<Option<Line>, std::io::Error> {
    match r {
        Ok(line) => Ok(line.map(Line::Text)),
        // The codec now discards up to the next line break.
        Err(LinesCodecError::MaxLineLengthExceeded) => Ok(Some(Line::TooLong)),
        // The codec's only own I/O error: it consumed the line before checking its UTF-8.
        Err(LinesCodecError::Io(e)) if e.kind() == std::io::ErrorKind::InvalidData => {
            Ok(Some(Line::NotUtf8))
        }
        Err(LinesCodecError::Io(e)) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;
    use tokio_util::codec::FramedRead;

    #[tokio::test]
    async fn over_long_and_non_utf8_lines_are_items_not_the_end() {
        // Found by fuzz target stdio_framer (framedread-after-error): with LinesCodec,
        // FramedRead ended the stream after the first such line, and the session with it.
        let mut input = b"{\"a\":1}\n".to_vec();
        input.extend_from_slice(&[b'x'; 1025]);
        input.extend_from_slice(b"\n\xff\xfe\n{\"b\":2}\r\n");
        input.extend_from_slice(&[b'y'; 1025]); // over-long, at the end without a break
        let lines: Vec<Result<Line, String>> = FramedRead::new(&input[..], LineCodec::new(1024))
            .map(|l| l.map_err(|e| e.to_string()))
            .collect()
            .await;
        assert_eq!(
            lines,
            [
                Ok(Line::Text("{\"a\":1}".into())),
                Ok(Line::TooLong),
                Ok(Line::NotUtf8),
                Ok(Line::Text("{\"b\":2}".into())),
                Ok(Line::TooLong),
            ]
        );
    }
}
