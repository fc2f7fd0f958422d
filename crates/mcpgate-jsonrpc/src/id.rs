//! Request ids, kept as their raw JSON text.

use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use crate::error::ParseError;

/// A JSON-RPC request id, kept as its raw JSON text (`1`, `"abc"`) so that it goes back to
/// the client byte for byte as it came. A short id (at most 22 bytes of text: counters,
/// short strings) is held inline, so reading one from a message and copying it around
/// allocates nothing.
#[derive(Clone)]
pub struct Id(Repr);

/// Longest id text held inline.
const INLINE: usize = 22;

#[derive(Clone)]
enum Repr {
    /// `len` bytes of `buf`, valid UTF-8 (copied from a `&str`).
    Inline {
        len: u8,
        buf: [u8; INLINE],
    },
    Shared(Arc<str>),
}

impl Id {
    /// An id of this raw text (already checked to be one).
    fn of(raw: &str) -> Self {
        if let Some(len) = u8::try_from(raw.len()).ok().filter(|_| raw.len() <= INLINE) {
            let mut buf = [0u8; INLINE];
            buf[..raw.len()].copy_from_slice(raw.as_bytes());
            Id(Repr::Inline { len, buf })
        } else {
            Id(Repr::Shared(Arc::from(raw)))
        }
    }

    /// The raw JSON text of the id.
    pub fn as_raw(&self) -> &str {
        match &self.0 {
            Repr::Inline { len, buf } => {
                // Copied from a `&str` in `of`, whole: still UTF-8.
                std::str::from_utf8(&buf[..usize::from(*len)]).unwrap_or_default()
            }
            Repr::Shared(s) => s,
        }
    }

    /// A numeric id (used for ids the gateway mints toward an upstream).
    pub fn number(n: u64) -> Self {
        use std::io::Write;
        // A u64 has at most 20 digits: it fits inline, written without a String.
        let mut buf = [0u8; INLINE];
        let mut rest = &mut buf[..];
        match write!(rest, "{n}") {
            Ok(()) => {
                let len = INLINE - rest.len();
                Id::of(std::str::from_utf8(&buf[..len]).unwrap_or("0"))
            }
            Err(_) => Id::of(&n.to_string()),
        }
    }

    /// Parses the raw JSON text of an id; only strings and integers are ids.
    pub fn from_raw(raw: &str) -> Result<Self, ParseError> {
        let raw = raw.trim();
        let ok = match raw.as_bytes().first() {
            // A valid JSON string (it starts with a quote), checked without copying it.
            Some(b'"') => serde_json::from_str::<serde::de::IgnoredAny>(raw).is_ok(),
            Some(b'-' | b'0'..=b'9') => serde_json::from_str::<serde_json::Number>(raw).is_ok(),
            _ => false,
        };
        if ok {
            Ok(Id::of(raw))
        } else {
            Err(ParseError::Invalid("id must be a string or a number"))
        }
    }

    /// The id as a JSON value (to put in a message built with `serde_json`).
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::from_str(self.as_raw()).unwrap_or(serde_json::Value::Null)
    }

    /// The id as an unsigned integer, when it is one (ids the gateway minted).
    pub fn as_u64(&self) -> Option<u64> {
        self.as_raw().parse().ok()
    }
}

impl PartialEq for Id {
    fn eq(&self, other: &Self) -> bool {
        self.as_raw() == other.as_raw()
    }
}

impl Eq for Id {}

impl Hash for Id {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_raw().hash(state);
    }
}

impl fmt::Debug for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_raw())
    }
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_raw())
    }
}

#[cfg(test)]
mod tests {
    use super::Id;
    use std::collections::HashSet;

    #[test]
    fn short_and_long_ids_keep_their_text_and_compare_by_it() {
        let long = format!("\"{}\"", "x".repeat(40));
        for raw in [
            "1",
            "-7",
            "\"abc\"",
            "\"1234567890123456789012\"",
            long.as_str(),
        ] {
            let id = Id::from_raw(raw).unwrap();
            assert_eq!(id.as_raw(), raw);
            assert_eq!(id.to_string(), raw);
            assert_eq!(id, Id::from_raw(&format!(" {raw} ")).unwrap());
        }
        let set: HashSet<Id> = ["1", "\"1\"", "1"]
            .iter()
            .map(|r| Id::from_raw(r).unwrap())
            .collect();
        assert_eq!(set.len(), 2, "1 and \"1\" are different ids");
        assert_eq!(Id::number(42).as_u64(), Some(42));
        assert_eq!(Id::number(u64::MAX).as_raw(), u64::MAX.to_string());
        assert_eq!(Id::number(0).as_raw(), "0");
        assert!(Id::from_raw("\"unterminated").is_err());
        assert!(Id::from_raw("{}").is_err());
        assert!(Id::from_raw("1.5x").is_err());
    }
}
