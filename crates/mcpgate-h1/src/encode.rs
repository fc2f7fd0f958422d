//! Heads written straight into a connection's write buffer.

use http::header::{CONNECTION, CONTENT_LENGTH, CONTENT_TYPE, DATE, TRANSFER_ENCODING};
use http::{HeaderMap, Method, StatusCode, Version};

/// How the body that follows an encoded head is framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyLength {
    /// `Content-Length`.
    Known(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
    /// No framing field: the body ends with the connection (HTTP/1.0 streams).
    UntilClose,
    /// No body and no framing field (`1xx`, `204`, `304`).
    None,
}

/// Writes a response head: the status line, `headers` (without any framing or
/// `Connection` field of theirs: those are the encoder's), `content_type` unless
/// `headers` has one, the framing field, `Date` unless `headers` has one, and
/// `Connection: close` when `close`.
pub fn encode_response_head(
    dst: &mut Vec<u8>,
    (version, status): (Version, StatusCode),
    headers: &HeaderMap,
    content_type: Option<&[u8]>,
    body: BodyLength,
    close: bool,
) {
    dst.extend_from_slice(if version == Version::HTTP_10 {
        b"HTTP/1.0 "
    } else {
        b"HTTP/1.1 "
    });
    dst.extend_from_slice(status.as_str().as_bytes());
    dst.push(b' ');
    dst.extend_from_slice(status.canonical_reason().unwrap_or("").as_bytes());
    dst.extend_from_slice(b"\r\n");
    encode_fields(dst, headers);
    if let Some(ct) = content_type.filter(|_| !headers.contains_key(CONTENT_TYPE)) {
        field(dst, b"content-type", ct);
    }
    encode_framing(dst, body);
    if !headers.contains_key(DATE) {
        crate::date::http_date(|d| field(dst, b"date", d));
    }
    if close {
        dst.extend_from_slice(b"connection: close\r\n");
    }
    dst.extend_from_slice(b"\r\n");
}

/// Writes a request head: the request line, `headers` (without framing or `Connection`
/// fields of theirs) and the framing field. `headers` must hold `Host`.
pub fn encode_request_head(
    dst: &mut Vec<u8>,
    method: &Method,
    target: &[u8],
    headers: &HeaderMap,
    body: BodyLength,
) {
    encode_request_line(dst, method, target);
    encode_fields(dst, headers);
    encode_framing(dst, body);
    dst.extend_from_slice(b"\r\n");
}

/// Writes a request line, `METHOD target HTTP/1.1`.
pub fn encode_request_line(dst: &mut Vec<u8>, method: &Method, target: &[u8]) {
    dst.extend_from_slice(method.as_str().as_bytes());
    dst.push(b' ');
    dst.extend_from_slice(target);
    dst.extend_from_slice(b" HTTP/1.1\r\n");
}

/// The fields of `headers`, framing and `Connection` fields left out.
pub fn encode_fields(dst: &mut Vec<u8>, headers: &HeaderMap) {
    for (name, value) in headers {
        if name == CONTENT_LENGTH || name == TRANSFER_ENCODING || name == CONNECTION {
            continue;
        }
        field(dst, name.as_str().as_bytes(), value.as_bytes());
    }
}

/// The framing field for `body`.
pub fn encode_framing(dst: &mut Vec<u8>, body: BodyLength) {
    match body {
        BodyLength::Known(n) => {
            dst.extend_from_slice(b"content-length: ");
            decimal(dst, n);
            dst.extend_from_slice(b"\r\n");
        }
        BodyLength::Chunked => dst.extend_from_slice(b"transfer-encoding: chunked\r\n"),
        BodyLength::UntilClose | BodyLength::None => {}
    }
}

/// One field, `name: value\r\n`.
pub fn field(dst: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    dst.extend_from_slice(name);
    dst.extend_from_slice(b": ");
    dst.extend_from_slice(value);
    dst.extend_from_slice(b"\r\n");
}

/// `n` in decimal.
pub fn decimal(dst: &mut Vec<u8>, mut n: u64) {
    let mut tmp = [0u8; 20];
    let mut i = tmp.len();
    loop {
        i -= 1;
        tmp[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    dst.extend_from_slice(&tmp[i..]);
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use http::HeaderValue;

    #[test]
    fn a_response_head_frames_its_body_and_dates_itself() {
        let mut h = HeaderMap::new();
        h.insert("content-type", HeaderValue::from_static("application/json"));
        h.insert("content-length", HeaderValue::from_static("999"));
        h.insert("connection", HeaderValue::from_static("keep-alive"));
        let mut out = Vec::new();
        encode_response_head(
            &mut out,
            (Version::HTTP_11, StatusCode::OK),
            &h,
            Some(b"text/plain"),
            BodyLength::Known(36),
            false,
        );
        let s = String::from_utf8(out).unwrap();
        assert!(
            s.starts_with(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 36\r\ndate: "
            ),
            "{s}"
        );
        assert!(s.ends_with(" GMT\r\n\r\n"), "{s}");
        assert!(!s.contains("999") && !s.contains("keep-alive"), "{s}");
        let mut out = Vec::new();
        encode_response_head(
            &mut out,
            (Version::HTTP_10, StatusCode::BAD_REQUEST),
            &HeaderMap::new(),
            Some(b"application/json"),
            BodyLength::Chunked,
            true,
        );
        let s = String::from_utf8(out).unwrap();
        assert!(s.starts_with(
            "HTTP/1.0 400 Bad Request\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\ndate: "
        ));
        assert!(s.ends_with("connection: close\r\n\r\n"));
    }

    #[test]
    fn a_request_head_says_its_length() {
        let mut h = HeaderMap::new();
        h.insert("host", HeaderValue::from_static("127.0.0.1:1"));
        let mut out = Vec::new();
        encode_request_head(&mut out, &Method::POST, b"/mcp", &h, BodyLength::Known(0));
        assert_eq!(
            out,
            b"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:1\r\ncontent-length: 0\r\n\r\n"
        );
        let mut n = Vec::new();
        for v in [0, 7, 10, 1234567890, u64::MAX] {
            n.clear();
            decimal(&mut n, v);
            assert_eq!(n, v.to_string().as_bytes());
        }
    }
}
