//! The SSRF guard of `/api/fetch`, the HTTP relay the Inspector UI uses for OAuth
//! discovery and token requests. A page that reaches the backend must not turn it into a
//! way into the machine's or the cluster's network: every address a request would connect
//! to — the URL's own, each one its host name resolves to, and those of every redirect —
//! must be a public unicast address unless the configuration allows its range
//! (`fetch_allow`). The check is in the DNS resolver the relay's client connects through, so
//! what is checked is what is connected to (no second lookup a rebinding DNS server could
//! answer differently), and in its redirect policy for literal addresses.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use ipnet::IpNet;

use crate::error::{FetchAllowError, InspectorError};

/// Why `ip` may not be fetched from, or `None` when it is a public unicast address.
pub(crate) fn forbidden(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => forbidden_v4(v4),
        IpAddr::V6(v6) => forbidden_v6(v6),
    }
}

fn forbidden_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, c, _] = ip.octets();
    Some(match (a, b, c) {
        _ if ip.is_loopback() => "loopback",
        _ if ip.is_unspecified() || a == 0 => "unspecified (this network)",
        (169, 254, _) => "link-local (cloud metadata services live here)",
        _ if ip.is_private() => "private",
        (100, 64..=127, _) => "shared address space (carrier-grade NAT)",
        (192, 0, 0) => "IETF protocol assignments",
        (198, 18..=19, _) => "benchmarking",
        _ if ip.is_documentation() => "documentation",
        _ if ip.is_multicast() => "multicast",
        _ if ip.is_broadcast() || a >= 240 => "reserved",
        _ => return None,
    })
}

fn forbidden_v6(ip: Ipv6Addr) -> Option<&'static str> {
    // Addresses that carry an IPv4 address are judged by it.
    if let Some(v4) = ip.to_ipv4_mapped() {
        return forbidden_v4(v4);
    }
    let seg = ip.segments();
    let o = ip.octets();
    // NAT64 (64:ff9b::/96) carries its IPv4 address last, 6to4 (2002::/16) right after
    // the prefix.
    if seg[0] == 0x64 && seg[1] == 0xff9b && seg[2..6] == [0, 0, 0, 0] {
        return forbidden_v4(Ipv4Addr::new(o[12], o[13], o[14], o[15]));
    }
    if seg[0] == 0x2002 {
        return forbidden_v4(Ipv4Addr::new(o[2], o[3], o[4], o[5]));
    }
    Some(match seg[0] {
        // Local-use NAT64 (64:ff9b:1::/48): translated inside some network.
        0x64 if seg[1] == 0xff9b && seg[2] == 1 => "local-use NAT64",
        // Teredo (2001::/32) tunnels to an IPv4 address the host cannot see.
        0x2001 if seg[1] == 0 => "Teredo",
        // Discard-only (100::/64).
        0x100 if seg[1..4] == [0, 0, 0] => "discard-only",
        _ if ip.is_loopback() => "loopback",
        _ if ip.is_unspecified() => "unspecified",
        _ if ip.is_unique_local() => "unique local (private)",
        _ if ip.is_unicast_link_local() => "link-local",
        0xfec0..=0xfeff => "site-local",
        _ if ip.is_multicast() => "multicast",
        0x2001 if seg[1] == 0x0db8 => "documentation",
        // The rest of ::/8 (IPv4-compatible and other reserved forms).
        0 => "reserved",
        _ => return None,
    })
}

/// The ranges `/api/fetch` may reach although they are not public.
#[derive(Debug, Clone, Default)]
pub struct FetchAllow(Arc<[IpNet]>);

impl FetchAllow {
    /// From CIDRs (`10.1.0.0/16`, `::1/128`) or single addresses.
    pub fn parse<S: AsRef<str>>(items: &[S]) -> Result<Self, FetchAllowError> {
        let nets = items
            .iter()
            .map(|s| {
                let s = s.as_ref().trim();
                s.parse::<IpNet>().or_else(|source| {
                    s.parse::<IpAddr>()
                        .map(IpNet::from)
                        .map_err(|_| FetchAllowError {
                            entry: s.to_owned(),
                            source,
                        })
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(FetchAllow(nets.into()))
    }

    /// Why `ip` is refused, `None` when it may be reached.
    pub(crate) fn refuses(&self, ip: IpAddr) -> Option<&'static str> {
        let why = forbidden(ip)?;
        (!self.0.iter().any(|n| n.contains(&ip))).then_some(why)
    }
}

/// A refusal by the guard, carried through reqwest's error chain (the resolver's and the
/// redirect policy's), so the relay can tell it from a failure of the server.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Refused {
    /// A host name that resolves to an address not allowed.
    #[error(
        "{host} is {addr}, a {why} address; /api/fetch reaches public addresses only (see fetch_allow)"
    )]
    Address {
        host: String,
        addr: IpAddr,
        why: &'static str,
    },
    /// A URL whose host is an address not allowed.
    #[error(
        "{addr} is a {why} address; /api/fetch reaches public addresses only (see fetch_allow)"
    )]
    Literal { addr: IpAddr, why: &'static str },
    /// A URL whose scheme is not http or https.
    #[error("scheme {scheme:?} is not http or https")]
    Scheme { scheme: String },
    /// A URL without a host.
    #[error("the URL has no host")]
    NoHost,
    /// A sixth redirect.
    #[error("more than 5 redirects")]
    TooManyRedirects,
    /// A redirect to a refused URL, or too many.
    #[error("redirect to {to} refused: {why}")]
    Redirect { to: String, why: Box<Refused> },
}

impl Refused {
    /// Whether `e`, or what caused it, is a refusal by the guard.
    pub(crate) fn in_chain(e: &(dyn std::error::Error + 'static)) -> bool {
        let mut cur = Some(e);
        while let Some(x) = cur {
            if x.downcast_ref::<Refused>().is_some() {
                return true;
            }
            cur = x.source();
        }
        false
    }
}

/// A URL as logs and errors show it: no user info, no query (OAuth codes live there).
pub(crate) fn shown(url: &reqwest::Url) -> String {
    format!(
        "{}://{}{}{}",
        url.scheme(),
        url.host_str().unwrap_or(""),
        url.port().map(|p| format!(":{p}")).unwrap_or_default(),
        url.path()
    )
}

/// The resolver of the relay's client: the system's lookup, then the guard.
struct GuardedResolver(FetchAllow);

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let allow = self.0.clone();
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let addrs: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            // One refused address refuses the name: which one a connection would take is
            // not ours to choose.
            if let Some((addr, why)) = addrs
                .iter()
                .find_map(|a| allow.refuses(a.ip()).map(|w| (a.ip(), w)))
            {
                return Err(Box::new(Refused::Address { host, addr, why }) as _);
            }
            Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// Checks a URL's scheme and, when its host is an address, the address.
pub(crate) fn check_url(url: &reqwest::Url, allow: &FetchAllow) -> Result<(), Refused> {
    if !matches!(url.scheme(), "http" | "https") {
        return Err(Refused::Scheme {
            scheme: url.scheme().to_owned(),
        });
    }
    let ip = match url.host() {
        Some(url::Host::Ipv4(ip)) => IpAddr::V4(ip),
        Some(url::Host::Ipv6(ip)) => IpAddr::V6(ip),
        Some(url::Host::Domain(_)) => return Ok(()),
        None => return Err(Refused::NoHost),
    };
    match allow.refuses(ip) {
        Some(why) => Err(Refused::Literal { addr: ip, why }),
        None => Ok(()),
    }
}

/// The relay's client: no proxy (a proxy would connect on its behalf, past the guard),
/// the guarded resolver, at most 5 redirects, each checked like the first URL. Fails
/// rather than fall back to an unguarded client.
pub(crate) fn client(allow: FetchAllow) -> Result<reqwest::Client, InspectorError> {
    let for_redirects = allow.clone();
    reqwest::Client::builder()
        .no_proxy()
        .dns_resolver(GuardedResolver(allow))
        .redirect(reqwest::redirect::Policy::custom(move |attempt| {
            let to = shown(attempt.url());
            let why = if attempt.previous().len() >= 5 {
                Refused::TooManyRedirects
            } else {
                match check_url(attempt.url(), &for_redirects) {
                    Ok(()) => return attempt.follow(),
                    Err(e) => e,
                }
            };
            attempt.error(Refused::Redirect {
                to,
                why: Box::new(why),
            })
        }))
        .timeout(std::time::Duration::from_secs(30))
        .build()
        .map_err(InspectorError::FetchClient)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_addresses_are_refused_and_public_ones_pass() {
        for bad in [
            "127.0.0.1",
            "127.5.6.7",
            "0.0.0.0",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "fd00:ec2::254",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "64:ff9b::10.0.0.1",
            "::127.0.0.1",
            "2002:7f00:1::1",
            "2002:a9fe:a9fe::1",
            "64:ff9b:1::a00:1",
            "2001:0:4136:e378::1",
            "100::1",
        ] {
            let ip: IpAddr = bad.parse().unwrap();
            assert!(forbidden(ip).is_some(), "{bad} must be refused");
        }
        for good in [
            "1.1.1.1",
            "8.8.8.8",
            "172.32.0.1",
            "2606:4700::1111",
            "64:ff9b::8.8.8.8",
            "2002:808:808::1",
        ] {
            let ip: IpAddr = good.parse().unwrap();
            assert_eq!(forbidden(ip), None, "{good} is public");
        }
    }

    #[test]
    fn an_allowed_range_opens_only_itself() {
        let allow = FetchAllow::parse(&["127.0.0.1", "10.1.0.0/16"]).unwrap();
        assert_eq!(allow.refuses("127.0.0.1".parse().unwrap()), None);
        assert_eq!(allow.refuses("10.1.9.9".parse().unwrap()), None);
        assert!(allow.refuses("10.2.0.1".parse().unwrap()).is_some());
        assert!(allow.refuses("127.0.0.2".parse().unwrap()).is_some());
        assert!(FetchAllow::parse(&["nonsense"]).is_err());
    }

    #[test]
    fn urls_with_internal_literals_or_odd_schemes_are_refused() {
        let allow = FetchAllow::default();
        for bad in [
            "http://169.254.169.254/latest/meta-data/",
            "http://[::1]:8080/",
            "file:///etc/passwd",
            "http://10.0.0.1/",
        ] {
            let u = reqwest::Url::parse(bad).unwrap();
            assert!(check_url(&u, &allow).is_err(), "{bad}");
        }
        let u = reqwest::Url::parse("https://auth.example.com/.well-known/x").unwrap();
        assert!(check_url(&u, &allow).is_ok());
    }
}
