//! A client's request head: parsed in place, its framing decided once.

use std::mem::MaybeUninit;

use http::{Method, Version};

use crate::error::{Framing, H1Error};
use crate::field::{BodyKind, Field, has_token, span};

/// Most fields a head may have whatever [`Limits::max_headers`] says (the parser's array).
const MAX_FIELDS: usize = 128;

/// How large a request head may be.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Bytes of the head, request line to the empty line.
    pub max_head: usize,
    /// Header fields.
    pub max_headers: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_head: 64 * 1024,
            max_headers: 100,
        }
    }
}

/// A parsed request head. Its fields are in the `fields` vector given to
/// [`parse_request`], as ranges of the parsed bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestHead {
    /// The method.
    pub method: Method,
    /// HTTP/1.0 or HTTP/1.1.
    pub version: Version,
    /// The request target's bytes.
    pub target: (u32, u32),
    /// Bytes of the head, the empty line included: where the body starts.
    pub len: usize,
    /// Where the body ends.
    pub body: BodyKind,
    /// Whether the connection closes after this exchange (`Connection: close`, or an
    /// HTTP/1.0 request without `keep-alive`).
    pub close: bool,
    /// Whether the client waits for `100 Continue` before it sends the body.
    pub expect_continue: bool,
}

/// Parses the request head at the start of `buf`. `Ok(None)`: not complete yet (read
/// more). The fields go into `fields` (cleared first), so a connection reuses one vector.
pub fn parse_request(
    buf: &[u8],
    limits: &Limits,
    fields: &mut Vec<Field>,
) -> Result<Option<RequestHead>, H1Error> {
    fields.clear();
    let mut slots = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_FIELDS];
    let mut req = httparse::Request::new(&mut []);
    let slots = &mut slots[..limits.max_headers.clamp(1, MAX_FIELDS)];
    let len = match req.parse_with_uninit_headers(buf, slots) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) if buf.len() >= limits.max_head => {
            return Err(H1Error::HeadTooLarge);
        }
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => return Err(H1Error::HeadTooLarge),
        Err(e) => return Err(H1Error::Malformed(e)),
    };
    if len > limits.max_head {
        return Err(H1Error::HeadTooLarge);
    }
    let version = match req.version {
        Some(0) => Version::HTTP_10,
        _ => Version::HTTP_11,
    };
    let method = req
        .method
        .and_then(|m| Method::from_bytes(m.as_bytes()).ok())
        .ok_or(H1Error::Malformed(httparse::Error::Token))?;
    let path = req.path.unwrap_or("");
    if path.is_empty() {
        return Err(H1Error::Malformed(httparse::Error::Token));
    }
    let mut framing = Framer::default();
    for h in req.headers.iter() {
        fields.push(Field::of(buf, h));
        framing.field(h.name.as_bytes(), h.value)?;
    }
    let body = framing.body(version)?;
    let close = if version == Version::HTTP_10 {
        !framing.keep_alive
    } else {
        framing.close
    };
    Ok(Some(RequestHead {
        method,
        version,
        target: span(buf, path.as_bytes()),
        len,
        body,
        close,
        expect_continue: framing.expect_continue && version == Version::HTTP_11,
    }))
}

/// What the fields say about framing and the connection, gathered field by field.
#[derive(Debug, Default)]
pub(crate) struct Framer {
    length: Option<u64>,
    codings: usize,
    chunked: bool,
    pub(crate) close: bool,
    pub(crate) keep_alive: bool,
    expect_continue: bool,
}

impl Framer {
    pub(crate) fn field(&mut self, name: &[u8], value: &[u8]) -> Result<(), H1Error> {
        if name.eq_ignore_ascii_case(b"content-length") {
            for part in value.split(|b| *b == b',') {
                let n = decimal(part.trim_ascii()).ok_or(Framing::Length)?;
                if self.length.is_some_and(|m| m != n) {
                    return Err(Framing::Length.into());
                }
                self.length = Some(n);
            }
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            self.codings += 1;
            self.chunked = value.trim_ascii().eq_ignore_ascii_case(b"chunked");
        } else if name.eq_ignore_ascii_case(b"connection") {
            self.close |= has_token(value, "close");
            self.keep_alive |= has_token(value, "keep-alive");
        } else if name.eq_ignore_ascii_case(b"expect") {
            self.expect_continue = value.trim_ascii().eq_ignore_ascii_case(b"100-continue");
        }
        Ok(())
    }

    /// The body's framing of a request.
    fn body(&self, version: Version) -> Result<BodyKind, H1Error> {
        if self.codings > 0 {
            if self.length.is_some() {
                return Err(Framing::LengthAndCoding.into());
            }
            if version == Version::HTTP_10 {
                return Err(Framing::CodingOnHttp10.into());
            }
            if self.codings > 1 || !self.chunked {
                return Err(Framing::Coding.into());
            }
            return Ok(BodyKind::Chunked);
        }
        Ok(match self.length {
            Some(0) | None => BodyKind::Empty,
            Some(n) => BodyKind::Length(n),
        })
    }

    /// The body's framing of a response (RFC 9112 §6.3: a coding other than a final
    /// `chunked` reads to the close; no length reads to the close).
    pub(crate) fn response_body(&self) -> Result<BodyKind, H1Error> {
        if self.codings > 0 {
            if self.length.is_some() {
                return Err(Framing::LengthAndCoding.into());
            }
            return Ok(if self.codings == 1 && self.chunked {
                BodyKind::Chunked
            } else {
                BodyKind::UntilClose
            });
        }
        Ok(match self.length {
            Some(0) => BodyKind::Empty,
            Some(n) => BodyKind::Length(n),
            None => BodyKind::UntilClose,
        })
    }
}

/// A plain decimal (`1*DIGIT`, at most 19 digits: fits a `u64`).
fn decimal(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 19 || !s.iter().all(u8::is_ascii_digit) {
        return None;
    }
    s.iter().try_fold(0u64, |n, d| {
        n.checked_mul(10)?.checked_add(u64::from(d - b'0'))
    })
}

#[cfg(test)]
mod tests;
