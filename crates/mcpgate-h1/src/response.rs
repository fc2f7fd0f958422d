//! An upstream's response head: parsed in place, its framing decided once.

use http::Version;

use crate::error::H1Error;
use crate::field::{BodyKind, Field};
use crate::request::Framer;

/// Most fields of a response head.
const MAX_FIELDS: usize = 128;
/// Longest response head read.
pub const MAX_RESPONSE_HEAD: usize = 64 * 1024;

/// A parsed response head; its fields are in the vector given to [`parse_response`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseHead {
    /// The status code.
    pub status: u16,
    /// HTTP/1.0 or HTTP/1.1.
    pub version: Version,
    /// Bytes of the head, the empty line included.
    pub len: usize,
    /// Where the body ends. An interim (`1xx`) head has none: the caller reads the next.
    pub body: BodyKind,
    /// Whether the connection cannot carry another request after this one.
    pub close: bool,
}

impl ResponseHead {
    /// Whether this is an interim answer (`100 Continue`, `103 Early Hints`) to skip.
    pub fn is_interim(&self) -> bool {
        (100..200).contains(&self.status)
    }
}

/// Parses the response head at the start of `buf`, the answer to a request whose method
/// was `HEAD` when `to_head`. `Ok(None)`: not complete yet.
pub fn parse_response(
    buf: &[u8],
    to_head: bool,
    fields: &mut Vec<Field>,
) -> Result<Option<ResponseHead>, H1Error> {
    fields.clear();
    let mut slots = [httparse::EMPTY_HEADER; MAX_FIELDS];
    let mut resp = httparse::Response::new(&mut slots);
    let len = match resp.parse(buf) {
        Ok(httparse::Status::Complete(n)) if n <= MAX_RESPONSE_HEAD => n,
        Ok(httparse::Status::Complete(_)) => return Err(H1Error::HeadTooLarge),
        Ok(httparse::Status::Partial) if buf.len() >= MAX_RESPONSE_HEAD => {
            return Err(H1Error::HeadTooLarge);
        }
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => return Err(H1Error::HeadTooLarge),
        Err(e) => return Err(H1Error::Malformed(e)),
    };
    let status = resp.code.unwrap_or(0);
    let version = match resp.version {
        Some(0) => Version::HTTP_10,
        _ => Version::HTTP_11,
    };
    if status == 101 {
        return Err(H1Error::Status(status));
    }
    let mut framing = Framer::default();
    for h in resp.headers.iter() {
        fields.push(Field::of(buf, h));
        framing.field(h.name.as_bytes(), h.value)?;
    }
    let body = if to_head || status == 204 || status == 304 || (100..200).contains(&status) {
        BodyKind::Empty
    } else {
        framing.response_body()?
    };
    let close = body == BodyKind::UntilClose
        || if version == Version::HTTP_10 {
            !framing.keep_alive
        } else {
            framing.close
        };
    Ok(Some(ResponseHead {
        status,
        version,
        len,
        body,
        close,
    }))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn parse(raw: &[u8]) -> Result<Option<ResponseHead>, H1Error> {
        parse_response(raw, false, &mut Vec::new())
    }

    #[test]
    fn framings_of_answers() {
        let json =
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 36\r\n\r\n";
        let h = parse(json).unwrap().unwrap();
        assert_eq!(
            (h.status, h.body, h.close),
            (200, BodyKind::Length(36), false)
        );
        let sse = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n";
        assert_eq!(parse(sse).unwrap().unwrap().body, BodyKind::Chunked);
        let eof = b"HTTP/1.1 200 OK\r\n\r\n";
        let h = parse(eof).unwrap().unwrap();
        assert_eq!((h.body, h.close), (BodyKind::UntilClose, true));
        let gzip = b"HTTP/1.1 200 OK\r\ntransfer-encoding: gzip\r\n\r\n";
        assert_eq!(parse(gzip).unwrap().unwrap().body, BodyKind::UntilClose);
        let accepted = b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n";
        assert_eq!(parse(accepted).unwrap().unwrap().body, BodyKind::Empty);
        let none = b"HTTP/1.1 204 No Content\r\n\r\n";
        assert_eq!(parse(none).unwrap().unwrap().body, BodyKind::Empty);
        let old = b"HTTP/1.0 200 OK\r\ncontent-length: 2\r\n\r\n";
        assert!(parse(old).unwrap().unwrap().close);
        let interim = b"HTTP/1.1 100 Continue\r\n\r\n";
        assert!(parse(interim).unwrap().unwrap().is_interim());
        let h = parse_response(json, true, &mut Vec::new())
            .unwrap()
            .unwrap();
        assert_eq!(h.body, BodyKind::Empty);
    }

    #[test]
    fn ambiguous_answers_are_refused() {
        let both = b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\ntransfer-encoding: chunked\r\n\r\n";
        assert!(parse(both).is_err());
        let two = b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\ncontent-length: 4\r\n\r\n";
        assert!(parse(two).is_err());
        assert!(parse(b"HTTP/1.1 101 Switching Protocols\r\n\r\n").is_err());
        assert!(parse(b"HTTP/1.1 2000 OK\r\n\r\n").is_err());
        assert_eq!(parse(b"HTTP/1.1 200 OK\r\ncontent-").unwrap(), None);
    }
}
