//! Random values of the authorization-code dance: `state`, the PKCE verifier and its S256
//! challenge (RFC 7636), elicitation ids.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest, Sha256};

/// `n` random bytes, base64url (for `state` and the verifier: 32 bytes → 43 characters).
pub(crate) fn random(n: usize) -> String {
    let mut b = vec![0u8; n];
    if getrandom::fill(&mut b).is_err() {
        // A predictable state or verifier would be worse than no gateway.
        std::process::abort();
    }
    URL_SAFE_NO_PAD.encode(b)
}

/// The S256 challenge of `verifier`.
pub(crate) fn challenge(verifier: &str) -> String {
    URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

/// `key=value` pairs as a query string.
pub(crate) fn query(pairs: &[(&str, &str)]) -> String {
    let mut out = String::new();
    for (k, v) in pairs {
        if !out.is_empty() {
            out.push('&');
        }
        out.push_str(k);
        out.push('=');
        for b in v.bytes() {
            match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                    out.push(b as char)
                }
                _ => out.push_str(&format!("%{b:02X}")),
            }
        }
    }
    out
}

/// The value of `key` in a query string, percent-decoded.
pub(crate) fn param(query: &str, key: &str) -> Option<String> {
    query.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        (k == key).then(|| decode(v))
    })
}

fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => match (hex(b[i + 1]), hex(b[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push(h << 4 | l);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex(c: u8) -> Option<u8> {
    (c as char).to_digit(16).map(|d| d as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc7636_appendix_b() {
        assert_eq!(
            challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
        assert_eq!(random(32).len(), 43);
        assert_ne!(random(32), random(32));
    }

    #[test]
    fn queries_round_trip() {
        let q = query(&[("redirect_uri", "http://h/cb?x=1"), ("scope", "a b")]);
        assert_eq!(q, "redirect_uri=http%3A%2F%2Fh%2Fcb%3Fx%3D1&scope=a%20b");
        assert_eq!(param(&q, "redirect_uri").unwrap(), "http://h/cb?x=1");
        assert_eq!(param(&q, "scope").unwrap(), "a b");
        assert_eq!(param("a=%zz&b=1+2", "a").unwrap(), "%zz");
        assert_eq!(param("a=%zz&b=1+2", "b").unwrap(), "1 2");
        assert_eq!(param("a=%4", "a").unwrap(), "%4");
        assert_eq!(param("a=%éé", "a").unwrap(), "%éé");
        assert!(param("a=1", "b").is_none());
    }
}
