//! DNS-rebinding protection: arbitrary `Host` and `Origin` header values through
//! `mcpgate_server::AccessPolicy::check`, for the default (loopback) policy and for a
//! configured one.
//!
//! Input: byte 0 says which headers are present (bit 0 `Host`, bit 1 `Origin`, bit 2 a
//! second `Origin`); the rest is split at `\0` bytes into the values, in that order.
//!
//! Checks (a failure is a crash):
//! - nothing panics;
//! - the answer does not depend on ASCII case;
//! - whatever is accepted and is a well-formed `host[:port]` / `scheme://host[:port]` names
//!   an allowed host (and `http` or `https`, or a configured origin).
#![no_main]

use http::{HeaderMap, HeaderValue, header};
use libfuzzer_sys::fuzz_target;
use mcpgate_server::AccessPolicy;

const LOOPBACK: &[&str] = &["localhost", "127.0.0.1", "[::1]"];
const CONFIGURED_HOSTS: &[&str] = &["mcp.example.com", "[fe80::1]", "10.0.0.5"];
const CONFIGURED_ORIGINS: &[&str] = &["https://app.example.com"];

fuzz_target!(|data: &[u8]| {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let mut values = rest.split(|b| *b == 0);
    let mut take = |on: bool| on.then(|| values.next()).flatten();
    let host = take(flags & 1 != 0);
    let origin = take(flags & 2 != 0);
    let origin2 = take(flags & 4 != 0);

    let headers = |upper: bool| -> Option<HeaderMap> {
        let value = |v: &[u8]| {
            let v = if upper { v.to_ascii_uppercase() } else { v.to_vec() };
            HeaderValue::from_bytes(&v).ok()
        };
        let mut h = HeaderMap::new();
        if let Some(v) = host {
            h.append(header::HOST, value(v)?);
        }
        for v in [origin, origin2].into_iter().flatten() {
            h.append(header::ORIGIN, value(v)?);
        }
        Some(h)
    };
    let (Some(lower), Some(upper)) = (headers(false), headers(true)) else {
        return; // not a header value hyper would hand over
    };

    let default = AccessPolicy::default();
    let hosts: Vec<String> = CONFIGURED_HOSTS.iter().map(|s| s.to_string()).collect();
    let origins: Vec<String> = CONFIGURED_ORIGINS.iter().map(|s| s.to_string()).collect();
    let configured = AccessPolicy::new(&hosts, &origins);

    for (policy, allowed_hosts, allowed_origins) in [
        (&default, LOOPBACK, &[][..]),
        (&configured, CONFIGURED_HOSTS, CONFIGURED_ORIGINS),
    ] {
        let verdict = policy.check(&lower);
        assert_eq!(verdict, policy.check(&upper), "the verdict depends on case");
        if verdict.is_err() {
            continue;
        }
        // Accepted: what a browser or client could have meant must be allowed.
        // (hyper trims a header value's surrounding whitespace; the policy does too)
        if let Some(v) = lower.get(header::HOST).and_then(|v| v.to_str().ok()) {
            let v = v.trim();
            if let Some(h) = strict_authority(v) {
                assert!(
                    allowed_hosts.contains(&h.as_str()),
                    "Host {v:?} accepted, names {h:?}"
                );
            }
        }
        if let Some(v) = lower.get(header::ORIGIN).and_then(|v| v.to_str().ok()) {
            let v = v.trim();
            let lc = v.to_ascii_lowercase();
            if let Some((scheme, authority)) = lc.split_once("://") {
                if let Some(h) = strict_authority(authority) {
                    let configured = allowed_origins.contains(&lc.as_str());
                    assert!(
                        configured
                            || ((scheme == "http" || scheme == "https")
                                && allowed_hosts.contains(&h.as_str())),
                        "Origin {v:?} accepted, names {scheme}://{h}"
                    );
                }
            }
        }
    }
});

/// The lower-case host of a well-formed `host[:port]` (RFC 9110 `Host`): a reg-name or
/// IPv4 address, or an IP literal in brackets, and a port of digits. `None` otherwise.
fn strict_authority(v: &str) -> Option<String> {
    let v = v.to_ascii_lowercase();
    let (host, port) = if let Some(rest) = v.strip_prefix('[') {
        let (ip, after) = rest.split_once(']')?;
        if ip.is_empty() || !ip.bytes().all(|b| b.is_ascii_hexdigit() || b == b':' || b == b'.') {
            return None;
        }
        let port = match after {
            "" => "",
            p => p.strip_prefix(':')?,
        };
        (format!("[{ip}]"), port)
    } else {
        let (host, port) = v.split_once(':').unwrap_or((&v, ""));
        let reg_name = |b: u8| b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=%".contains(&b);
        if host.is_empty() || !host.bytes().all(reg_name) {
            return None;
        }
        (host.to_owned(), port)
    };
    if !port.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(host)
}
