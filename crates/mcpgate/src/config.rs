//! Configuration: raw TOML structs (unknown keys rejected, defaults documented) →
//! `validate()` → the typed configuration the library crates take.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, bail};
use mcpgate_server::FrontConfig;
use mcpgate_session::{ServerSpec, SessionConfig};
use mcpgate_upstream::{Target, Timeouts};
use serde::{Deserialize, Serialize};

/// The whole file.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawConfig {
    #[serde(default)]
    listen: RawListen,
    #[serde(default, rename = "server")]
    servers: Vec<RawServer>,
    #[serde(default)]
    session: RawSession,
    #[serde(default)]
    upstream: RawUpstream,
    /// The admin API and dashboard; off unless the section is present.
    admin: Option<RawAdmin>,
    /// Client authentication; off unless the section is present.
    auth: Option<RawAuth>,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
struct RawAuth {
    /// Static bearer tokens (API keys).
    tokens: Vec<RawToken>,
    /// JWT access tokens of an OAuth 2.1 authorization server.
    jwt: Option<RawJwt>,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct RawToken {
    /// The principal's name.
    name: String,
    /// The token itself, or
    token: Option<String>,
    /// the environment variable that holds it.
    token_env: Option<String>,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct RawJwt {
    issuer: String,
    /// This gateway's resource identifier; tokens for any other audience are refused.
    audience: String,
    jwks_url: String,
    #[serde(default)]
    required_scopes: Vec<String>,
    #[serde(default = "default_jwks_refresh", with = "humantime_serde")]
    jwks_refresh: Duration,
    /// The canonical resource URL for RFC 9728 metadata; default: the audience.
    resource: Option<String>,
}

fn default_jwks_refresh() -> Duration {
    Duration::from_secs(600)
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
struct RawAdmin {
    /// Listen address of the admin API and dashboard. Default `127.0.0.1:8081`.
    addr: String,
    /// The admin bearer token. Default: read from the variable named by `token_env`, or
    /// else generated at start and printed once.
    token: Option<String>,
    /// An environment variable holding the admin token.
    token_env: Option<String>,
}

impl Default for RawAdmin {
    fn default() -> Self {
        RawAdmin {
            addr: "127.0.0.1:8081".into(),
            token: None,
            token_env: None,
        }
    }
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
struct RawListen {
    /// Address to listen on. Default `127.0.0.1:8080` (loopback only).
    addr: String,
    /// Largest request body in bytes. Default 4 MiB.
    max_body_bytes: usize,
    /// SSE keep-alive comment interval. Default 15s.
    #[serde(with = "humantime_serde")]
    keep_alive: Duration,
    /// Time in-flight requests get to finish on shutdown. Default 25s.
    #[serde(with = "humantime_serde")]
    drain: Duration,
    /// This replica's id: every minted session id starts with `{replica_id}-`, so a load
    /// balancer can send each request to the replica that owns its session. Default empty.
    replica_id: String,
    /// `Host` names accepted (DNS-rebinding protection). Default: loopback names and the
    /// listen address. `"*"` accepts any.
    allowed_hosts: Vec<String>,
    /// `Origin`s accepted besides those whose host is an allowed host. `"*"` accepts any.
    allowed_origins: Vec<String>,
    /// Requests per second per principal (per client address without authentication);
    /// 0 turns the limit off. Default 0.
    rate_limit_per_second: u32,
    /// Burst allowed above the rate. Default 2 × the rate.
    rate_limit_burst: Option<u32>,
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
        }
    }
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct RawServer {
    name: String,
    transport: Transport,
    url: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    /// Headers whose values are read from environment variables (upstream credentials
    /// kept out of the file): header name → variable name.
    #[serde(default)]
    headers_env: BTreeMap<String, String>,
    #[serde(default)]
    command: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    cwd: Option<String>,
    #[serde(default)]
    default: bool,
}

#[derive(Debug, Deserialize, Serialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
enum Transport {
    Stdio,
    StreamableHttp,
    /// The legacy HTTP+SSE transport (2024-11-05).
    Sse,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
struct RawSession {
    #[serde(with = "humantime_serde")]
    idle_timeout: Duration,
    max_sessions: usize,
    max_sessions_per_principal: usize,
    max_inflight: usize,
    backlog: usize,
    #[serde(with = "humantime_serde")]
    request_timeout: Duration,
    replay_events: usize,
    replay_streams: usize,
}

impl Default for RawSession {
    fn default() -> Self {
        let s = SessionConfig::default();
        RawSession {
            idle_timeout: s.idle_timeout,
            max_sessions: s.max_sessions,
            max_sessions_per_principal: s.max_sessions_per_principal,
            max_inflight: s.max_inflight,
            backlog: s.backlog,
            request_timeout: s.request_timeout,
            replay_events: s.replay_events,
            replay_streams: s.replay_streams,
        }
    }
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
struct RawUpstream {
    #[serde(with = "humantime_serde")]
    connect_timeout: Duration,
    #[serde(with = "humantime_serde")]
    delete_timeout: Duration,
    #[serde(with = "humantime_serde")]
    exit_grace: Duration,
    max_line_bytes: usize,
    max_stdio_children: usize,
}

impl Default for RawUpstream {
    fn default() -> Self {
        let t = Timeouts::default();
        RawUpstream {
            connect_timeout: t.connect,
            delete_timeout: t.delete,
            exit_grace: t.exit_grace,
            max_line_bytes: 4 * 1024 * 1024,
            max_stdio_children: 1000,
        }
    }
}

/// The validated configuration.
#[derive(Debug)]
pub(crate) struct Config {
    pub(crate) listen: SocketAddr,
    pub(crate) front: FrontConfig,
    pub(crate) session: SessionConfig,
    pub(crate) timeouts: Timeouts,
    pub(crate) max_line: usize,
    pub(crate) max_stdio_children: usize,
    pub(crate) servers: Vec<ServerSpec>,
    pub(crate) default_server: Option<String>,
    pub(crate) id_prefix: String,
    /// Why the configuration is risky, if it is (printed as warnings).
    pub(crate) warnings: Vec<String>,
    /// The admin listener: address and token (`None`: generate one).
    pub(crate) admin: Option<(SocketAddr, Option<String>)>,
    /// The effective configuration as JSON, secrets redacted (for the admin API).
    pub(crate) redacted: serde_json::Value,
}

impl RawConfig {
    /// Reads and parses a TOML file.
    pub(crate) fn load(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        toml::from_str(&text).with_context(|| format!("invalid config {}", path.display()))
    }

    /// A config with one server given on the command line.
    pub(crate) fn single(addr: Option<String>, target: Target) -> Self {
        let mut raw = RawConfig::default();
        if let Some(a) = addr {
            raw.listen.addr = a;
        }
        let (transport, url, command) = match target {
            Target::Http { url, .. } => (Transport::StreamableHttp, Some(url), Vec::new()),
            Target::LegacySse { url, .. } => (Transport::Sse, Some(url), Vec::new()),
            Target::Stdio { command, .. } => (Transport::Stdio, None, command),
        };
        raw.servers.push(RawServer {
            name: "default".into(),
            transport,
            url,
            headers: BTreeMap::new(),
            headers_env: BTreeMap::new(),
            command,
            env: BTreeMap::new(),
            cwd: None,
            default: true,
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

    /// Checks every value and builds the typed config.
    pub(crate) fn validate(self) -> anyhow::Result<Config> {
        let redacted = self.redacted();
        let admin = match &self.admin {
            None => None,
            Some(a) => {
                let addr: SocketAddr = a.addr.parse().with_context(|| {
                    format!("admin.addr: {:?} is not an IP:port address", a.addr)
                })?;
                let token = match (&a.token, &a.token_env) {
                    (Some(t), _) => Some(t.clone()),
                    (None, Some(var)) => Some(
                        std::env::var(var)
                            .with_context(|| format!("admin.token_env: {var} is not set"))?,
                    ),
                    (None, None) => None,
                };
                if token.as_ref().is_some_and(|t| t.len() < 16) {
                    bail!("admin token must be at least 16 characters");
                }
                Some((addr, token))
            }
        };
        let listen: SocketAddr = self.listen.addr.parse().with_context(|| {
            format!(
                "listen.addr: {:?} is not an IP:port address",
                self.listen.addr
            )
        })?;
        if self.servers.is_empty() {
            bail!("no [[server]] configured: add one, or pass --upstream URL or -- CMD");
        }
        let mut servers = Vec::new();
        let mut default_server = None;
        for (i, s) in self.servers.into_iter().enumerate() {
            let at = format!("server[{i}] ({:?})", s.name);
            if s.name.is_empty()
                || !s
                    .name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            {
                bail!("{at}: name must be non-empty and use only letters, digits, '-' and '_'");
            }
            if servers.iter().any(|x: &ServerSpec| x.name == s.name) {
                bail!("{at}: duplicate server name");
            }
            let target = match s.transport {
                Transport::StreamableHttp | Transport::Sse => {
                    let Some(url) = s.url else {
                        bail!("{at}: transport \"streamable-http\" and \"sse\" need url")
                    };
                    if !(url.starts_with("http://") || url.starts_with("https://")) {
                        bail!("{at}: url must start with http:// or https://");
                    }
                    if !s.command.is_empty() || !s.env.is_empty() || s.cwd.is_some() {
                        bail!("{at}: command, env and cwd are for transport \"stdio\"");
                    }
                    let mut headers: Vec<(String, String)> = s.headers.into_iter().collect();
                    for (name, var) in s.headers_env {
                        let value = std::env::var(&var).with_context(|| {
                            format!("{at}: headers_env.{name}: {var} is not set")
                        })?;
                        headers.push((name, value));
                    }
                    if s.transport == Transport::Sse {
                        Target::LegacySse { url, headers }
                    } else {
                        Target::Http { url, headers }
                    }
                }
                Transport::Stdio => {
                    if s.command.is_empty() || s.command[0].is_empty() {
                        bail!(
                            "{at}: transport \"stdio\" needs command = [\"program\", \"arg\", …]"
                        );
                    }
                    if s.url.is_some() || !s.headers.is_empty() || !s.headers_env.is_empty() {
                        bail!("{at}: url and headers are for the HTTP transports");
                    }
                    Target::Stdio {
                        command: s.command,
                        env: s.env,
                        cwd: s.cwd,
                        env_clear: false,
                    }
                }
            };
            if s.default {
                if default_server.is_some() {
                    bail!("{at}: more than one server is marked default");
                }
                default_server = Some(s.name.clone());
            }
            servers.push(ServerSpec {
                name: s.name,
                target,
            });
        }
        let l = self.listen;
        if l.max_body_bytes < 1024 {
            bail!("listen.max_body_bytes must be at least 1024");
        }
        if l.keep_alive.is_zero() {
            bail!("listen.keep_alive must be above zero");
        }
        if l.replica_id.len() > 32
            || !l
                .replica_id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_')
        {
            bail!("listen.replica_id must be at most 32 letters, digits or '_'");
        }
        let s = self.session;
        if s.idle_timeout.is_zero() || s.request_timeout.is_zero() {
            bail!("session.idle_timeout and session.request_timeout must be above zero");
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
        {
            bail!("session.max_sessions, max_inflight and backlog must be at least 1");
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
        let auth = match self.auth {
            None => mcpgate_server::AuthConfig::default(),
            Some(a) => {
                let mut tokens = Vec::new();
                for t in a.tokens {
                    let token = match (t.token, &t.token_env) {
                        (Some(v), None) => v,
                        (None, Some(var)) => std::env::var(var).with_context(|| {
                            format!("auth.tokens {:?}: {var} is not set", t.name)
                        })?,
                        _ => bail!(
                            "auth.tokens {:?}: give exactly one of token and token_env",
                            t.name
                        ),
                    };
                    if token.len() < 16 {
                        bail!(
                            "auth.tokens {:?}: a token must be at least 16 characters",
                            t.name
                        );
                    }
                    tokens.push(mcpgate_server::StaticToken {
                        name: t.name,
                        token,
                    });
                }
                let jwt = a.jwt.map(|j| mcpgate_server::JwtConfig {
                    resource: j.resource.unwrap_or_else(|| j.audience.clone()),
                    issuer: j.issuer,
                    audience: j.audience,
                    jwks_url: j.jwks_url,
                    required_scopes: j.required_scopes,
                    jwks_refresh: j.jwks_refresh,
                });
                let cfg = mcpgate_server::AuthConfig { tokens, jwt };
                if !cfg.is_enabled() {
                    bail!("[auth] is present but configures neither tokens nor jwt");
                }
                cfg
            }
        };
        let mut warnings = Vec::new();
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
        let access = mcpgate_server::AccessPolicy::new(&hosts, &l.allowed_origins);
        Ok(Config {
            listen,
            front: FrontConfig {
                max_body: l.max_body_bytes,
                keep_alive: l.keep_alive,
                drain: l.drain,
                access,
                auth,
                rate_limit: (l.rate_limit_per_second > 0).then(|| {
                    (
                        l.rate_limit_per_second,
                        l.rate_limit_burst
                            .unwrap_or(l.rate_limit_per_second.saturating_mul(2)),
                    )
                }),
                ..FrontConfig::default()
            },
            session: SessionConfig {
                idle_timeout: s.idle_timeout,
                max_sessions: s.max_sessions,
                max_sessions_per_principal: s.max_sessions_per_principal,
                max_inflight: s.max_inflight,
                backlog: s.backlog,
                request_timeout: s.request_timeout,
                replay_events: s.replay_events,
                replay_streams: s.replay_streams,
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
            admin,
            redacted,
            id_prefix: if l.replica_id.is_empty() {
                String::new()
            } else {
                format!("{}-", l.replica_id)
            },
            warnings,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> anyhow::Result<Config> {
        toml::from_str::<RawConfig>(s)?.validate()
    }

    #[test]
    fn every_example_config_is_valid() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config");
        let mut n = 0;
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "toml") {
                RawConfig::load(&p)
                    .and_then(RawConfig::validate)
                    .unwrap_or_else(|e| panic!("{}: {e:#}", p.display()));
                n += 1;
            }
        }
        assert!(n > 0, "no example configs found in {}", dir.display());
    }

    #[test]
    fn rejects_unknown_keys_and_bad_values() {
        let ok = "[[server]]\nname='a'\ntransport='stdio'\ncommand=['x']\n";
        assert!(parse(ok).is_ok());
        assert!(parse(&format!("{ok}bogus=1\n")).is_err());
        assert!(parse("[[server]]\nname='a'\ntransport='stdio'\n").is_err());
        assert!(
            parse("[[server]]\nname='a'\ntransport='streamable-http'\nurl='ftp://x'\n").is_err()
        );
        assert!(parse(&format!("{ok}[session]\nidle_timeout='0s'\n")).is_err());
        assert!(parse(&format!("[listen]\naddr='nope'\n{ok}")).is_err());
        assert!(parse("").is_err());
        let c = parse(&format!("{ok}[session]\nidle_timeout='90s'\n")).unwrap();
        assert_eq!(c.session.idle_timeout, Duration::from_secs(90));
        assert_eq!(c.listen.to_string(), "127.0.0.1:8080");
    }
}
