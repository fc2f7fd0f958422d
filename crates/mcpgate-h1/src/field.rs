//! A parsed head's header fields, and where its body ends.

/// Where a message body ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyKind {
    /// No body.
    Empty,
    /// Exactly this many bytes.
    Length(u64),
    /// The chunked transfer coding.
    Chunked,
    /// Until the connection closes (a response only).
    UntilClose,
}

/// A header field of a parsed head: its name and value as ranges of the head's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    /// The name's bytes.
    pub name: (u32, u32),
    /// The value's bytes.
    pub value: (u32, u32),
}

impl Field {
    pub(crate) fn of(base: &[u8], h: &httparse::Header<'_>) -> Field {
        Field {
            name: span(base, h.name.as_bytes()),
            value: span(base, h.value),
        }
    }

    /// The name, in `head` (the bytes the head was parsed from).
    pub fn name<'a>(&self, head: &'a [u8]) -> &'a [u8] {
        &head[self.name.0 as usize..self.name.1 as usize]
    }

    /// The value, in `head`.
    pub fn value<'a>(&self, head: &'a [u8]) -> &'a [u8] {
        &head[self.value.0 as usize..self.value.1 as usize]
    }
}

/// The range `part` takes in `base` (it is a sub-slice of it).
pub(crate) fn span(base: &[u8], part: &[u8]) -> (u32, u32) {
    let start = (part.as_ptr() as usize).saturating_sub(base.as_ptr() as usize);
    let end = start + part.len();
    (
        u32::try_from(start).unwrap_or(u32::MAX),
        u32::try_from(end).unwrap_or(u32::MAX),
    )
}

/// Whether a comma-separated header value lists `token` (case-insensitively).
pub fn has_token(value: &[u8], token: &str) -> bool {
    value
        .split(|b| *b == b',')
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(token.as_bytes()))
}
