//! Request ids, kept as their raw JSON text.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use crate::error::ParseError;

/// A JSON-RPC request id, kept as its raw JSON text (`1`, `"abc"`) so that it goes back to
/// the client byte for byte as it came.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Id(Arc<str>);

impl Id {
    /// The raw JSON text of the id.
    pub fn as_raw(&self) -> &str {
        &self.0
    }

    /// A numeric id (used for ids the gateway mints toward an upstream).
    pub fn number(n: u64) -> Self {
        Id(Arc::from(n.to_string()))
    }

    /// Parses the raw JSON text of an id; only strings and integers are ids.
    pub fn from_raw(raw: &str) -> Result<Self, ParseError> {
        let raw = raw.trim();
        let ok = match raw.as_bytes().first() {
            Some(b'"') => serde_json::from_str::<Cow<'_, str>>(raw).is_ok(),
            Some(b'-' | b'0'..=b'9') => serde_json::from_str::<serde_json::Number>(raw).is_ok(),
            _ => false,
        };
        if ok {
            Ok(Id(Arc::from(raw)))
        } else {
            Err(ParseError::Invalid("id must be a string or a number"))
        }
    }

    /// The id as a JSON value (to put in a message built with `serde_json`).
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::from_str(&self.0).unwrap_or(serde_json::Value::Null)
    }

    /// The id as an unsigned integer, when it is one (ids the gateway minted).
    pub fn as_u64(&self) -> Option<u64> {
        self.0.parse().ok()
    }
}

impl fmt::Debug for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
