//! `[listen]`: the client-facing listener — its address, the front's limits and timeouts,
//! which `Host` and `Origin` values it accepts, the rate limit, its TLS files and the
//! replica id; and the warnings an exposed listener deserves.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use mcpgate_server::{AccessPolicy, AuthConfig, ConnLimits, FrontConfig};
use serde::{Deserialize, Serialize};

use super::tls::{ListenerTls, listener_tls};

/// `[listen]` as written.
#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct RawListen {
    /// Address to listen on. Default `127.0.0.1:8080` (loopback only).
    pub(super) addr: String,
    /// Largest request body in bytes (at least 1024). Default 4 MiB.
    pub(super) max_body_bytes: usize,
    /// SSE keep-alive comment interval. Default 15s.
    #[serde(with = "humantime_serde")]
    pub(super) keep_alive: Duration,
    /// Time in-flight requests get to finish on shutdown. Default 25s.
    #[serde(with = "humantime_serde")]
    pub(super) drain: Duration,
    /// This replica's id: every minted session id starts with `{replica_id}-`, so a load
    /// balancer can send each request to the replica that owns its session. At most 32
    /// letters, digits or `_`. Default empty.
    pub(super) replica_id: String,
    /// `Host` names accepted (DNS-rebinding protection). Default: loopback names and the
    /// listen address. `"*"` accepts any.
    pub(super) allowed_hosts: Vec<String>,
    /// `Origin`s accepted besides those whose host is an allowed host. `"*"` accepts any.
    pub(super) allowed_origins: Vec<String>,
    /// Requests per second per principal (per client address without authentication);
    /// 0 turns the limit off. Default 0.
    pub(super) rate_limit_per_second: u32,
    /// Burst allowed above the rate. Default 2 × the rate.
    pub(super) rate_limit_burst: Option<u32>,
    /// TLS: the listener's certificate chain (PEM); with `tls_key`, the listener speaks
    /// HTTPS only.
    pub(super) tls_cert: Option<PathBuf>,
    /// TLS: the certificate's private key (PEM).
    pub(super) tls_key: Option<PathBuf>,
    /// TLS: require client certificates issued by these CAs (PEM).
    pub(super) client_ca: Option<PathBuf>,
    /// How often the TLS files (this listener's and the admin's) are checked for changes
    /// (at least 100ms). Default 10s.
    #[serde(with = "humantime_serde")]
    pub(super) tls_reload_interval: Duration,
    /// Time a client has to send a request's head; also how long an idle keep-alive
    /// connection is kept. Default 10s.
    #[serde(with = "humantime_serde")]
    pub(super) header_timeout: Duration,
    /// Time a client has to send a request's body (408 beyond). Default 30s.
    #[serde(with = "humantime_serde")]
    pub(super) body_timeout: Duration,
    /// Connections open at once. Default 4096.
    pub(super) max_connections: usize,
    /// Connections open at once from one client address (0: no cap). Default 512.
    pub(super) max_connections_per_client: usize,
    /// Connections below `max_connections` that serve only probes and existing sessions.
    /// Default 64.
    pub(super) connection_reserve: usize,
}

impl Default for RawListen {
    fn default() -> Self {
        let f = FrontConfig::default();
        RawListen {
            addr: "127.0.0.1:8080".into(),
            max_body_bytes: f.max_body,
            keep_alive: f.keep_alive,
            drain: f.drain,
            replica_id: String::new(),
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            rate_limit_per_second: 0,
            rate_limit_burst: None,
            tls_cert: None,
            tls_key: None,
            client_ca: None,
            tls_reload_interval: Duration::from_secs(10),
            header_timeout: f.header_timeout,
            body_timeout: f.body_timeout,
            max_connections: f.connections.max,
            max_connections_per_client: f.connections.per_client,
            connection_reserve: f.connections.reserve,
        }
    }
}

/// `[listen]` checked.
#[derive(Debug)]
pub(super) struct Listen {
    pub(super) addr: SocketAddr,
    /// The front's settings this section holds (its authentication, in-flight and input
    /// limits come from `[auth]` and `[session]`).
    pub(super) front: FrontConfig,
    /// The listener's TLS files (`None`: plain HTTP).
    pub(super) tls: Option<ListenerTls>,
    /// What every minted session id starts with (`{replica_id}-`, or empty).
    pub(super) id_prefix: String,
    /// How often TLS files are checked for changes (the admin listener's too).
    pub(super) tls_reload_interval: Duration,
    /// Whether `allowed_hosts` names no host (for the exposure warning).
    no_allowed_hosts: bool,
}

impl RawListen {
    /// Checks the address, the limits and the TLS files (a certificate about to expire is
    /// a warning).
    pub(super) fn validate(self, warnings: &mut Vec<String>) -> anyhow::Result<Listen> {
        let addr: SocketAddr = self
            .addr
            .parse()
            .with_context(|| format!("listen.addr: {:?} is not an IP:port address", self.addr))?;
        self.check_limits()?;
        let front = self.front(addr);
        let id_prefix = if self.replica_id.is_empty() {
            String::new()
        } else {
            format!("{}-", self.replica_id)
        };
        let no_allowed_hosts = self.allowed_hosts.is_empty();
        let tls = listener_tls(
            "listen",
            self.tls_cert,
            self.tls_key,
            self.client_ca,
            self.tls_reload_interval,
            warnings,
        )?;
        Ok(Listen {
            addr,
            front,
            tls,
            id_prefix,
            tls_reload_interval: self.tls_reload_interval,
            no_allowed_hosts,
        })
    }

    /// The body size, the timeouts, the connection limits and the replica id.
    fn check_limits(&self) -> anyhow::Result<()> {
        if self.max_body_bytes < 1024 {
            bail!("listen.max_body_bytes must be at least 1024");
        }
        if self.keep_alive.is_zero() || self.header_timeout.is_zero() || self.body_timeout.is_zero()
        {
            bail!("listen.keep_alive, header_timeout and body_timeout must be above zero");
        }
        if self.max_connections == 0 || self.connection_reserve >= self.max_connections {
            bail!("listen.max_connections must be at least 1 and above listen.connection_reserve");
        }
        if self.replica_id.len() > 32
            || !self
                .replica_id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_')
        {
            bail!("listen.replica_id must be at most 32 letters, digits or '_'");
        }
        Ok(())
    }

    /// The front's settings from this section, listening on `addr`.
    fn front(&self, addr: SocketAddr) -> FrontConfig {
        FrontConfig {
            max_body: self.max_body_bytes,
            keep_alive: self.keep_alive,
            drain: self.drain,
            header_timeout: self.header_timeout,
            body_timeout: self.body_timeout,
            connections: ConnLimits {
                max: self.max_connections,
                per_client: self.max_connections_per_client,
                reserve: self.connection_reserve,
            },
            access: AccessPolicy::new(&self.hosts(addr), &self.allowed_origins),
            rate_limit: (self.rate_limit_per_second > 0).then(|| {
                (
                    self.rate_limit_per_second,
                    self.rate_limit_burst
                        .unwrap_or(self.rate_limit_per_second.saturating_mul(2)),
                )
            }),
            ..FrontConfig::default()
        }
    }

    /// The `Host` names accepted: loopback names, the listen address when it is neither
    /// loopback nor unspecified, and `allowed_hosts`.
    fn hosts(&self, addr: SocketAddr) -> Vec<String> {
        let mut hosts: Vec<String> = vec!["localhost".into(), "127.0.0.1".into(), "[::1]".into()];
        if !addr.ip().is_unspecified() && !addr.ip().is_loopback() {
            hosts.push(match addr.ip() {
                std::net::IpAddr::V6(ip) => format!("[{ip}]"),
                ip => ip.to_string(),
            });
        }
        hosts.extend(self.allowed_hosts.iter().cloned());
        hosts
    }
}

impl Listen {
    /// What is risky about a listener that is not on loopback: no authentication (and then
    /// no `allowed_hosts`), no TLS.
    pub(super) fn exposure(&self, auth: &AuthConfig) -> Vec<String> {
        let mut warnings = Vec::new();
        let addr = self.addr;
        if addr.ip().is_loopback() {
            return warnings;
        }
        if !auth.is_enabled() {
            warnings.push(format!(
                "listening on {addr}, which is not loopback, and no authentication is configured: anyone who can reach it can use every configured server"
            ));
            if self.no_allowed_hosts {
                warnings.push(
                    "listen.allowed_hosts is empty: requests whose Host is not a loopback name or the listen address get 403; list the names clients use".into(),
                );
            }
        }
        if self.tls.is_none() {
            warnings.push(format!(
                "listening on {addr} without TLS: traffic (tokens included) travels in the clear unless a TLS-terminating proxy is in front (set listen.tls_cert and listen.tls_key)"
            ));
        }
        warnings
    }
}
