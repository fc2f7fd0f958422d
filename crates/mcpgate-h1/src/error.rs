//! What can be wrong with a message on the wire.

/// Why a head or a chunked body was refused.
#[derive(Debug, thiserror::Error)]
pub enum H1Error {
    /// The head is not HTTP/1.x as RFC 9112 writes it (obs-fold, a space before a colon,
    /// a control byte in a field, a bad request line, …).
    #[error("malformed HTTP/1.1 head")]
    Malformed(#[source] httparse::Error),
    /// The head is longer than allowed, or has too many fields.
    #[error("HTTP head too large (over its size or field limit)")]
    HeadTooLarge,
    /// The message's length is ambiguous or not expressible.
    #[error("message framing refused: {0}")]
    Framing(Framing),
    /// The request target is not a URI.
    #[error("malformed request target")]
    Target(#[source] http::uri::InvalidUri),
    /// A chunked body broke the coding's grammar.
    #[error("malformed chunked body")]
    Chunk,
    /// A response status that a proxied exchange cannot carry (`101`, a second `1xx`
    /// storm).
    #[error("unsupported response status {0}")]
    Status(u16),
    /// The connection ended in the middle of a message.
    #[error("the connection closed in the middle of a message")]
    Incomplete,
}

/// Which framing rule a message broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Framing {
    /// `Transfer-Encoding` and `Content-Length` together.
    #[error("Transfer-Encoding with Content-Length")]
    LengthAndCoding,
    /// A `Transfer-Encoding` other than exactly `chunked`.
    #[error("Transfer-Encoding other than chunked")]
    Coding,
    /// `Transfer-Encoding` on an HTTP/1.0 message.
    #[error("Transfer-Encoding on HTTP/1.0")]
    CodingOnHttp10,
    /// `Content-Length` values that differ, or one that is not a decimal number.
    #[error("invalid or conflicting Content-Length")]
    Length,
}

impl From<Framing> for H1Error {
    fn from(f: Framing) -> Self {
        H1Error::Framing(f)
    }
}

impl H1Error {
    /// The status a server answers this error of a request with.
    pub fn status(&self) -> http::StatusCode {
        match self {
            H1Error::HeadTooLarge => http::StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            _ => http::StatusCode::BAD_REQUEST,
        }
    }
}
