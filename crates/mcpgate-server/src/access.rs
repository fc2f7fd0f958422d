//! DNS-rebinding protection: the `Host` of every MCP request must be one this gateway
//! answers to, and an `Origin`, when a browser sends one, must be allowed. A web page on
//! another site that resolves its own name to 127.0.0.1 therefore cannot drive the
//! gateway from a victim's browser.

use http::{HeaderMap, header};

/// Which `Host` and `Origin` values are accepted.
#[derive(Debug, Clone)]
pub struct AccessPolicy {
    /// Host names (no port), lower-case; `*` accepts any.
    hosts: Vec<String>,
    /// Exact origins (`scheme://host[:port]`), lower-case; `*` accepts any. An origin whose
    /// host is an allowed host is accepted too.
    origins: Vec<String>,
}

impl Default for AccessPolicy {
    /// Loopback names only.
    fn default() -> Self {
        AccessPolicy::new(
            &["localhost".into(), "127.0.0.1".into(), "[::1]".into()],
            &[],
        )
    }
}

impl AccessPolicy {
    /// A policy from configured host names (`example.com`, `10.0.0.5`, `[::1]`, `*`) and
    /// origins (`https://app.example.com`, `*`).
    pub fn new(hosts: &[String], origins: &[String]) -> Self {
        AccessPolicy {
            hosts: hosts.iter().map(|h| normalize_host(h)).collect(),
            origins: origins
                .iter()
                .map(|o| o.trim().trim_end_matches('/').to_ascii_lowercase())
                .collect(),
        }
    }

    /// Whether `host` (a `Host` value, or an origin's host) names an allowed host;
    /// compared in place, case-insensitively: nothing is allocated per request.
    fn host_allowed(&self, host: &str) -> bool {
        let (name, bracketed) = host_name(host);
        self.hosts.iter().any(|a| {
            a == "*"
                || if bracketed {
                    a.strip_prefix('[')
                        .and_then(|a| a.strip_suffix(']'))
                        .is_some_and(|a| a.eq_ignore_ascii_case(name))
                } else {
                    a.eq_ignore_ascii_case(name)
                }
        })
    }

    /// Checks a request's `Host` and `Origin`; the error names what was refused.
    pub fn check(&self, h: &HeaderMap) -> Result<(), &'static str> {
        if let Some(host) = h.get(header::HOST) {
            let ok = host.to_str().is_ok_and(|v| self.host_allowed(v));
            if !ok {
                return Err("Forbidden: Host not allowed");
            }
        }
        if let Some(origin) = h.get(header::ORIGIN) {
            let ok = origin.to_str().is_ok_and(|o| {
                let o = o.trim().trim_end_matches('/').to_ascii_lowercase();
                self.origins.iter().any(|a| a == "*" || *a == o)
                    || o.split_once("://")
                        .filter(|(scheme, _)| *scheme == "http" || *scheme == "https")
                        .is_some_and(|(_, host)| self.host_allowed(host))
            });
            if !ok {
                return Err("Forbidden: Origin not allowed");
            }
        }
        Ok(())
    }
}

/// `Example.COM:8080` → `example.com`; `[::1]:80` → `[::1]`; a bare IPv6 gets brackets.
fn normalize_host(h: &str) -> String {
    match host_name(h) {
        (name, true) => format!("[{}]", name.to_ascii_lowercase()),
        (name, false) => name.to_ascii_lowercase(),
    }
}

/// The host name of a `Host` value without its port, and whether it is an IPv6 address
/// (to be written in brackets): `Example.COM:8080` → (`Example.COM`, false); `[::1]:80`
/// and `::1` → (`::1`, true).
fn host_name(h: &str) -> (&str, bool) {
    let h = h.trim();
    if let Some(rest) = h.strip_prefix('[') {
        return match rest.split_once(']') {
            Some((ip, _)) => (ip, true),
            None => (h, false),
        };
    }
    match h.matches(':').count() {
        0 => (h, false),
        1 => (h.split(':').next().unwrap_or_default(), false),
        _ => (h, true),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn headers(host: Option<&str>, origin: Option<&str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        if let Some(v) = host {
            h.insert(header::HOST, HeaderValue::from_str(v).unwrap());
        }
        if let Some(v) = origin {
            h.insert(header::ORIGIN, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn loopback_by_default() {
        let p = AccessPolicy::default();
        assert!(
            p.check(&headers(
                Some("127.0.0.1:8080"),
                Some("http://127.0.0.1:8080")
            ))
            .is_ok()
        );
        assert!(
            p.check(&headers(Some("localhost"), Some("https://localhost:3000")))
                .is_ok()
        );
        assert!(p.check(&headers(Some("[::1]:9"), None)).is_ok());
        assert!(p.check(&headers(None, None)).is_ok());
        assert!(p.check(&headers(Some("evil.example.com"), None)).is_err());
        assert!(
            p.check(&headers(
                Some("127.0.0.1:8080"),
                Some("http://evil.example.com")
            ))
            .is_err()
        );
        assert!(p.check(&headers(Some("127.0.0.1"), Some("null"))).is_err());
        assert!(
            p.check(&headers(Some("127.0.0.1"), Some("file://localhost")))
                .is_err()
        );
    }

    #[test]
    fn hosts_compare_without_case_port_or_brackets() {
        let p = AccessPolicy::new(&["::1".into(), "Example.com".into()], &[]);
        assert!(p.check(&headers(Some("[::1]:80"), None)).is_ok());
        assert!(p.check(&headers(Some("[::2]:80"), None)).is_err());
        assert!(p.check(&headers(Some("EXAMPLE.COM:8443"), None)).is_ok());
        assert!(p.check(&headers(Some("example.com.evil"), None)).is_err());
        assert!(p.check(&headers(Some("localhost"), None)).is_err());
    }

    #[test]
    fn configured_hosts_and_origins() {
        let p = AccessPolicy::new(
            &["mcp.example.com".into()],
            &["https://app.example.com".into()],
        );
        assert!(
            p.check(&headers(
                Some("MCP.example.com:443"),
                Some("https://app.example.com")
            ))
            .is_ok()
        );
        assert!(p.check(&headers(Some("localhost"), None)).is_err());
        assert!(
            p.check(&headers(
                Some("mcp.example.com"),
                Some("https://other.example.com")
            ))
            .is_err()
        );
        let any = AccessPolicy::new(&["*".into()], &["*".into()]);
        assert!(
            any.check(&headers(Some("whatever"), Some("https://x")))
                .is_ok()
        );
    }
}
