//! Configuration: raw TOML structs (`raw.rs`: unknown keys rejected, defaults documented)
//! → `validate()` → the typed configuration the library crates take. `--check-config` runs
//! exactly this validation, certificate files included.
//!
//! - `raw.rs`: the file's structs and defaults.
//! - `servers.rs`: `[[server]]` entries (transports, URLs, upstream TLS, proxies).
//! - `security.rs`: listener TLS, `[auth]`, `[admin]`.
//! - `virtuals.rs`: `[[virtual]]` entries (members, prefixes, filters, access rules).

mod raw;
mod security;
mod servers;
#[cfg(test)]
mod tests;
mod virtuals;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;

use anyhow::{Context, bail};
use mcpgate_server::{ConnLimits, FrontConfig};
use mcpgate_session::{ServerSpec, SessionConfig};
use mcpgate_upstream::{Target, Timeouts};

/// Exit code for a bad command line or configuration (EX_USAGE).
pub(crate) const EXIT_CONFIG: u8 = 64;

pub(crate) use raw::RawConfig;
use raw::{RawServer, Transport};
pub(crate) use security::{AdminListener, ListenerTls};

/// The validated configuration.
#[derive(Debug)]
pub(crate) struct Config {
    pub(crate) listen: SocketAddr,
    pub(crate) front: FrontConfig,
    /// The listener's TLS files (`None`: plain HTTP), loaded at start.
    pub(crate) tls: Option<ListenerTls>,
    pub(crate) session: SessionConfig,
    pub(crate) timeouts: Timeouts,
    pub(crate) max_line: usize,
    pub(crate) max_stdio_children: usize,
    pub(crate) servers: Vec<ServerSpec>,
    pub(crate) default_server: Option<String>,
    /// Each static token principal's groups (virtual servers' access rules).
    pub(crate) groups: std::collections::HashMap<String, Vec<String>>,
    pub(crate) id_prefix: String,
    /// Why the configuration is risky, if it is (printed as warnings at every start and by
    /// `--check-config`).
    pub(crate) warnings: Vec<String>,
    /// The admin listener.
    pub(crate) admin: Option<AdminListener>,
    /// The effective configuration as JSON, secrets redacted (for the admin API).
    pub(crate) redacted: serde_json::Value,
    /// The keys that seal session ids (`None`: ids are not sealed).
    pub(crate) seal_keys: Option<mcpgate_seal::KeyRing>,
    /// How long a stateless upstream's sealed id opens for.
    pub(crate) sealed_stateless_lifetime: std::time::Duration,
    /// OpenTelemetry export (`None`: off).
    pub(crate) telemetry: Option<mcpgate_telemetry::TelemetryConfig>,
}

/// What a stdio server given on the command line (`-- CMD`) gets besides its command.
#[derive(Debug, Default)]
pub(crate) struct CommandExtras {
    pub(crate) env: BTreeMap<String, String>,
    pub(crate) cwd: Option<String>,
}

impl RawConfig {
    /// Reads and parses a TOML file.
    pub(crate) fn load(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        toml::from_str(&text).with_context(|| format!("invalid config {}", path.display()))
    }

    /// A config with one server given on the command line.
    pub(crate) fn single(addr: Option<String>, target: Target, extras: CommandExtras) -> Self {
        let mut raw = RawConfig::default();
        if let Some(a) = addr {
            raw.listen.addr = a;
        }
        let (transport, url, command) = match target {
            Target::Http { url, .. } => (Transport::StreamableHttp, Some(url), Vec::new()),
            Target::LegacySse { url, .. } => (Transport::Sse, Some(url), Vec::new()),
            Target::Stdio { command, .. } => (Transport::Stdio, None, command),
            // The command line names one real server.
        };
        raw.servers.push(RawServer {
            name: "default".into(),
            transport,
            url,
            headers: BTreeMap::new(),
            headers_env: BTreeMap::new(),
            command,
            env: extras.env,
            cwd: extras.cwd,
            default: true,
            ca_file: None,
            client_cert: None,
            client_key: None,
            dangerously_accept_invalid_certs: false,
            proxy: None,
            idle_timeout: None,
            evict_idle: None,
            protocol: None,
            bridge: None,
        });
        raw
    }

    /// Overrides the listen address (from `--listen`).
    pub(crate) fn set_listen(&mut self, addr: String) {
        self.listen.addr = addr;
    }

    /// The configuration as JSON with every secret (header values, environment values,
    /// tokens) replaced by `"<redacted>"`.
    fn redacted(&self) -> serde_json::Value {
        let mut v = serde_json::to_value(self).unwrap_or(serde_json::Value::Null);
        if let Some(servers) = v.get_mut("server").and_then(|s| s.as_array_mut()) {
            for s in servers {
                for key in ["headers", "env"] {
                    if let Some(map) = s.get_mut(key).and_then(|m| m.as_object_mut()) {
                        for val in map.values_mut() {
                            *val = "<redacted>".into();
                        }
                    }
                }
            }
        }
        if let Some(keys) = v
            .pointer_mut("/session/seal_keys")
            .and_then(|t| t.as_array_mut())
        {
            for k in keys {
                if let Some(s) = k.get_mut("secret").filter(|x| !x.is_null()) {
                    *s = "<redacted>".into();
                }
            }
        }
        if let Some(t) = v.pointer_mut("/admin/token").filter(|t| !t.is_null()) {
            *t = "<redacted>".into();
        }
        if let Some(tokens) = v.pointer_mut("/auth/tokens").and_then(|t| t.as_array_mut()) {
            for t in tokens {
                if let Some(tok) = t.get_mut("token").filter(|x| !x.is_null()) {
                    *tok = "<redacted>".into();
                }
            }
        }
        v
    }

    /// Checks every value (certificate files included) and builds the typed config.
    pub(crate) fn validate(self) -> anyhow::Result<Config> {
        let redacted = self.redacted();
        let mut warnings = Vec::new();
        let l = self.listen;
        let listen: SocketAddr = l
            .addr
            .parse()
            .with_context(|| format!("listen.addr: {:?} is not an IP:port address", l.addr))?;
        let admin = security::admin(self.admin, l.tls_reload_interval, &mut warnings)?;
        if self.servers.is_empty() {
            bail!("no [[server]] configured: add one, or pass --upstream URL or -- CMD");
        }
        let mut servers: Vec<ServerSpec> = Vec::new();
        let mut default_server = None;
        for (i, s) in self.servers.into_iter().enumerate() {
            let at = format!("server[{i}] ({:?})", s.name);
            if servers.iter().any(|x| x.name == s.name) {
                bail!("{at}: duplicate server name");
            }
            let default = s.default;
            let spec = servers::server(&at, s, &mut warnings)?;
            if default {
                if default_server.is_some() {
                    bail!("{at}: more than one server is marked default");
                }
                default_server = Some(spec.name.clone());
            }
            servers.push(spec);
        }
        for (i, v) in self.virtuals.into_iter().enumerate() {
            let at = format!("virtual[{i}] ({:?})", v.name);
            let default = v.default;
            let spec = virtuals::virtual_server(&at, v, &servers)?;
            if default {
                if default_server.is_some() {
                    bail!("{at}: more than one server is marked default");
                }
                default_server = Some(spec.name.clone());
            }
            servers.push(spec);
        }
        if l.max_body_bytes < 1024 {
            bail!("listen.max_body_bytes must be at least 1024");
        }
        if l.keep_alive.is_zero() || l.header_timeout.is_zero() || l.body_timeout.is_zero() {
            bail!("listen.keep_alive, header_timeout and body_timeout must be above zero");
        }
        if l.max_connections == 0 || l.connection_reserve >= l.max_connections {
            bail!("listen.max_connections must be at least 1 and above listen.connection_reserve");
        }
        if l.replica_id.len() > 32
            || !l
                .replica_id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_')
        {
            bail!("listen.replica_id must be at most 32 letters, digits or '_'");
        }
        let tls = security::listener_tls(
            "listen",
            l.tls_cert,
            l.tls_key,
            l.client_ca,
            l.tls_reload_interval,
            &mut warnings,
        )?;
        let s = self.session;
        if s.idle_timeout.is_zero() || s.request_timeout.is_zero() {
            bail!("session.idle_timeout and session.request_timeout must be above zero");
        }
        if s.bridge_sessions == 0 || s.max_waiting_inputs == 0 || s.input_timeout.is_zero() {
            bail!(
                "session.bridge_sessions, session.max_waiting_inputs and session.input_timeout must be above zero"
            );
        }
        if s.max_sessions_per_principal == 0 || self.upstream.max_stdio_children == 0 {
            bail!(
                "session.max_sessions_per_principal and upstream.max_stdio_children must be at least 1"
            );
        }
        if s.max_sessions == 0
            || s.max_inflight == 0
            || s.backlog == 0
            || s.replay_events == 0
            || s.replay_streams == 0
            || s.max_inflight_per_principal == 0
        {
            bail!("session.max_sessions, max_inflight and backlog must be at least 1");
        }
        let telemetry = match self.telemetry {
            None => None,
            Some(t) => {
                servers::check_url("telemetry.otlp_endpoint", &t.otlp_endpoint)?;
                if !(0.0..=1.0).contains(&t.sample_ratio) {
                    bail!("telemetry.sample_ratio must be between 0.0 and 1.0");
                }
                Some(mcpgate_telemetry::TelemetryConfig {
                    otlp_endpoint: t.otlp_endpoint,
                    service_name: t.service_name,
                    sample_ratio: t.sample_ratio,
                })
            }
        };
        let seal_keys = security::seal_keys(&s.seal_keys)?;
        if seal_keys.is_some() && s.sealed_stateless_lifetime.is_zero() {
            bail!("session.sealed_stateless_lifetime must be above zero");
        }
        let u = self.upstream;
        if u.max_line_bytes < 1024 {
            bail!("upstream.max_line_bytes must be at least 1024");
        }
        let mut hosts: Vec<String> = vec!["localhost".into(), "127.0.0.1".into(), "[::1]".into()];
        if !listen.ip().is_unspecified() && !listen.ip().is_loopback() {
            hosts.push(match listen.ip() {
                std::net::IpAddr::V6(ip) => format!("[{ip}]"),
                ip => ip.to_string(),
            });
        }
        hosts.extend(l.allowed_hosts.iter().cloned());
        let groups = self
            .auth
            .as_ref()
            .map(|a| {
                a.tokens
                    .iter()
                    .filter(|t| !t.groups.is_empty())
                    .map(|t| (format!("token:{}", t.name), t.groups.clone()))
                    .collect()
            })
            .unwrap_or_default();
        let auth = security::auth(self.auth)?;
        if !listen.ip().is_loopback() && !auth.is_enabled() {
            warnings.push(format!(
                "listening on {listen}, which is not loopback, and no authentication is configured: anyone who can reach it can use every configured server"
            ));
            if l.allowed_hosts.is_empty() {
                warnings.push(
                    "listen.allowed_hosts is empty: requests whose Host is not a loopback name or the listen address get 403; list the names clients use".into(),
                );
            }
        }
        if !listen.ip().is_loopback() && tls.is_none() {
            warnings.push(format!(
                "listening on {listen} without TLS: traffic (tokens included) travels in the clear unless a TLS-terminating proxy is in front (set listen.tls_cert and listen.tls_key)"
            ));
        }
        let access = mcpgate_server::AccessPolicy::new(&hosts, &l.allowed_origins);
        Ok(Config {
            listen,
            front: FrontConfig {
                max_body: l.max_body_bytes,
                keep_alive: l.keep_alive,
                drain: l.drain,
                header_timeout: l.header_timeout,
                body_timeout: l.body_timeout,
                connections: ConnLimits {
                    max: l.max_connections,
                    per_client: l.max_connections_per_client,
                    reserve: l.connection_reserve,
                },
                access,
                auth,
                rate_limit: (l.rate_limit_per_second > 0).then(|| {
                    (
                        l.rate_limit_per_second,
                        l.rate_limit_burst
                            .unwrap_or(l.rate_limit_per_second.saturating_mul(2)),
                    )
                }),
                tls: None,
                modern_inflight: s.max_inflight_per_principal,
                input_wait: (s.input_timeout, s.max_waiting_inputs),
            },
            tls,
            session: SessionConfig {
                idle_timeout: s.idle_timeout,
                max_sessions: s.max_sessions,
                max_sessions_per_principal: s.max_sessions_per_principal,
                max_inflight: s.max_inflight,
                backlog: s.backlog,
                backlog_bytes: s.backlog_bytes,
                request_timeout: s.request_timeout,
                replay_events: s.replay_events,
                replay_bytes: s.replay_bytes,
                replay_streams: s.replay_streams,
                era_ttl: u.protocol_cache,
                bridge_sessions: s.bridge_sessions,
                ..SessionConfig::default()
            },
            timeouts: Timeouts {
                connect: u.connect_timeout,
                request: s.request_timeout,
                delete: u.delete_timeout,
                exit_grace: u.exit_grace,
            },
            max_line: u.max_line_bytes,
            max_stdio_children: u.max_stdio_children,
            servers,
            default_server,
            groups,
            admin,
            redacted,
            seal_keys,
            sealed_stateless_lifetime: s.sealed_stateless_lifetime,
            telemetry,
            id_prefix: if l.replica_id.is_empty() {
                String::new()
            } else {
                format!("{}-", l.replica_id)
            },
            warnings,
        })
    }
}
