//! The bearer-token check of the admin API.

use http::HeaderMap;
use http::header::AUTHORIZATION;
use subtle::ConstantTimeEq;

/// Why a request is not authorised.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Denied {
    /// No `Authorization: Bearer …` header.
    Missing,
    /// A bearer token that is not the admin token.
    Invalid,
}

impl Denied {
    /// The `WWW-Authenticate` challenge (RFC 6750).
    pub(crate) fn challenge(self) -> &'static str {
        match self {
            Denied::Missing => "Bearer realm=\"mcpgate-admin\"",
            Denied::Invalid => "Bearer realm=\"mcpgate-admin\", error=\"invalid_token\"",
        }
    }

    /// The message in the JSON body.
    pub(crate) fn message(self) -> &'static str {
        match self {
            Denied::Missing => "missing bearer token",
            Denied::Invalid => "invalid bearer token",
        }
    }
}

/// Checks `Authorization: Bearer <token>` against `expected`. The comparison takes the
/// same time wherever the first difference is (only the length can be told apart).
pub(crate) fn check(headers: &HeaderMap, expected: &str) -> Result<(), Denied> {
    let Some(value) = headers.get(AUTHORIZATION) else {
        return Err(Denied::Missing);
    };
    let value = value.as_bytes();
    let Some((scheme, token)) = value.split_at_checked(6) else {
        return Err(Denied::Missing);
    };
    if !scheme.eq_ignore_ascii_case(b"bearer") || token.first() != Some(&b' ') {
        return Err(Denied::Missing);
    }
    let token = token.trim_ascii();
    if token.is_empty() {
        return Err(Denied::Missing);
    }
    if bool::from(token.ct_eq(expected.as_bytes())) {
        Ok(())
    } else {
        Err(Denied::Invalid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn with(v: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(
            AUTHORIZATION,
            HeaderValue::from_str(v).unwrap_or_else(|_| unreachable!()),
        );
        h
    }

    #[test]
    fn accepts_only_the_token() {
        let t = "0123456789abcdef0123";
        assert_eq!(check(&with("Bearer 0123456789abcdef0123"), t), Ok(()));
        assert_eq!(check(&with("bearer  0123456789abcdef0123 "), t), Ok(()));
        assert_eq!(check(&HeaderMap::new(), t), Err(Denied::Missing));
        assert_eq!(
            check(&with("Basic 0123456789abcdef0123"), t),
            Err(Denied::Missing)
        );
        assert_eq!(check(&with("Bearer "), t), Err(Denied::Missing));
        assert_eq!(check(&with("Bear"), t), Err(Denied::Missing));
        assert_eq!(
            check(&with("Bearer0123456789abcdef0123"), t),
            Err(Denied::Missing)
        );
        assert_eq!(
            check(&with("Bearer 0123456789abcdef0124"), t),
            Err(Denied::Invalid)
        );
        assert_eq!(
            check(&with("Bearer 0123456789abcdef012"), t),
            Err(Denied::Invalid)
        );
        assert_eq!(
            check(&with("Bearer 0123456789abcdef01234"), t),
            Err(Denied::Invalid)
        );
    }
}
