#![allow(clippy::unwrap_used)]

use super::*;

/// Decodes all of `raw` fed in pieces of `step` bytes: the body, or the first error.
fn decode(raw: &[u8], step: usize) -> Result<(Vec<u8>, bool), H1Error> {
    let mut d = ChunkedDecoder::default();
    let mut buf = BytesMut::new();
    let mut body = Vec::new();
    for piece in raw.chunks(step.max(1)) {
        buf.extend_from_slice(piece);
        while let Some(c) = d.decode(&mut buf)? {
            match c {
                Chunk::Data(b) => body.extend_from_slice(&b),
                Chunk::End => return Ok((body, buf.is_empty())),
            }
        }
    }
    Ok((body, false))
}

#[test]
fn bodies_decode_however_they_arrive() {
    let raw = b"5\r\nhello\r\n1;ext=1\r\n \r\nA\r\n0123456789\r\n0\r\nx-trailer: 1\r\n\r\n";
    for step in [1, 2, 3, 7, raw.len()] {
        let (body, exact) = decode(raw, step).unwrap();
        assert_eq!(body, b"hello 0123456789", "step {step}");
        assert!(exact, "step {step}: nothing past the end is taken");
    }
    assert_eq!(decode(b"0\r\n\r\n", 1).unwrap().0, b"");
}

#[test]
fn the_end_leaves_what_follows_in_the_buffer() {
    let mut d = ChunkedDecoder::default();
    let mut buf = BytesMut::from(&b"1\r\na\r\n0\r\n\r\nGET / HTTP/1.1\r\n"[..]);
    assert_eq!(
        d.decode(&mut buf).unwrap(),
        Some(Chunk::Data(Bytes::from_static(b"a")))
    );
    assert_eq!(d.decode(&mut buf).unwrap(), Some(Chunk::End));
    assert!(d.is_done());
    assert_eq!(&buf[..], b"GET / HTTP/1.1\r\n");
}

#[test]
fn malformed_codings_are_refused() {
    for raw in [
        &b"5\nhello\r\n0\r\n\r\n"[..],
        b"5\r\nhello\n0\r\n\r\n",
        b"5\r\nhelloXX0\r\n\r\n",
        b"\r\n",
        b"g\r\n",
        b"-5\r\nhello\r\n",
        b"11111111111111111\r\n",
        b"0\r\nx: y\n\r\n",
        b"5;a\nb\r\nhello\r\n",
    ] {
        assert!(
            decode(raw, 1).is_err(),
            "{:?}",
            String::from_utf8_lossy(raw)
        );
    }
    let long_ext = format!("1;{}\r\na\r\n0\r\n\r\n", "e".repeat(5000));
    assert!(decode(long_ext.as_bytes(), 64).is_err());
}

#[test]
fn size_lines_encode_in_hex() {
    for (n, s) in [
        (0, "0\r\n"),
        (10, "a\r\n"),
        (255, "ff\r\n"),
        (4096, "1000\r\n"),
    ] {
        let (b, len) = chunk_size_line(n);
        assert_eq!(&b[..len], s.as_bytes());
    }
    let (b, len) = chunk_size_line(usize::MAX);
    assert_eq!(&b[..len], b"ffffffffffffffff\r\n");
}
