//! The configuration file as written: serde structs with unknown keys rejected and every
//! default documented (the README's table and `config/example.toml` say the same).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use mcpgate_server::FrontConfig;
use mcpgate_session::SessionConfig;
use mcpgate_upstream::Timeouts;
use serde::{Deserialize, Serialize};

/// The whole file.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawConfig {
    #[serde(default)]
    pub(crate) listen: RawListen,
    #[serde(default, rename = "server")]
    pub(crate) servers: Vec<RawServer>,
    /// Virtual servers: several servers behind one endpoint.
    #[serde(default, rename = "virtual")]
    pub(crate) virtuals: Vec<super::virtuals::RawVirtual>,
    #[serde(default)]
    pub(crate) session: RawSession,
    #[serde(default)]
    pub(crate) upstream: RawUpstream,
    /// The admin API and dashboard; off unless the section is present.
    pub(crate) admin: Option<RawAdmin>,
    /// Client authentication; off unless the section is present.
    pub(crate) auth: Option<RawAuth>,
    /// OpenTelemetry tracing; off unless the section is present.
    pub(crate) telemetry: Option<RawTelemetry>,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawTelemetry {
    /// The OTLP/HTTP (protobuf) traces endpoint, e.g. `http://127.0.0.1:4318/v1/traces`.
    pub(crate) otlp_endpoint: String,
    /// The `service.name` of the traces. Default `mcpgate`.
    #[serde(default = "default_service_name")]
    pub(crate) service_name: String,
    /// The share of requests traced when the client sent no sampling decision (a client's
    /// `traceparent` flag is followed). Default 1.0.
    #[serde(default = "default_sample_ratio")]
    pub(crate) sample_ratio: f64,
}

fn default_sample_ratio() -> f64 {
    1.0
}

fn default_service_name() -> String {
    "mcpgate".into()
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawAuth {
    /// Static bearer tokens (API keys).
    pub(crate) tokens: Vec<RawToken>,
    /// JWT access tokens of an OAuth 2.1 authorization server.
    pub(crate) jwt: Option<RawJwt>,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawToken {
    /// The principal's name.
    pub(crate) name: String,
    /// The token itself, or
    pub(crate) token: Option<String>,
    /// the environment variable that holds it.
    pub(crate) token_env: Option<String>,
    /// The principal's groups, for virtual servers' access rules.
    #[serde(default)]
    pub(crate) groups: Vec<String>,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawJwt {
    pub(crate) issuer: String,
    /// This gateway's resource identifier; tokens for any other audience are refused.
    pub(crate) audience: String,
    pub(crate) jwks_url: String,
    #[serde(default)]
    pub(crate) required_scopes: Vec<String>,
    #[serde(default = "default_jwks_refresh", with = "humantime_serde")]
    pub(crate) jwks_refresh: Duration,
    /// The canonical resource URL for RFC 9728 metadata; default: the audience.
    pub(crate) resource: Option<String>,
    /// Extra CA certificates (PEM) for the JWKS endpoint.
    pub(crate) ca_file: Option<PathBuf>,
}

pub(crate) fn default_jwks_refresh() -> Duration {
    Duration::from_secs(600)
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawAdmin {
    /// Listen address of the admin API and dashboard. Default `127.0.0.1:8081`.
    pub(crate) addr: String,
    /// The admin bearer token. Default: read from the variable named by `token_env`, or
    /// else generated at start and printed once.
    pub(crate) token: Option<String>,
    /// An environment variable holding the admin token.
    pub(crate) token_env: Option<String>,
    /// TLS: the admin listener's certificate chain (PEM).
    pub(crate) tls_cert: Option<PathBuf>,
    /// TLS: its private key (PEM).
    pub(crate) tls_key: Option<PathBuf>,
    /// TLS: require client certificates issued by these CAs (PEM).
    pub(crate) client_ca: Option<PathBuf>,
}

impl Default for RawAdmin {
    fn default() -> Self {
        RawAdmin {
            addr: "127.0.0.1:8081".into(),
            token: None,
            token_env: None,
            tls_cert: None,
            tls_key: None,
            client_ca: None,
        }
    }
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawListen {
    /// Address to listen on. Default `127.0.0.1:8080` (loopback only).
    pub(crate) addr: String,
    /// Largest request body in bytes. Default 4 MiB.
    pub(crate) max_body_bytes: usize,
    /// SSE keep-alive comment interval. Default 15s.
    #[serde(with = "humantime_serde")]
    pub(crate) keep_alive: Duration,
    /// Time in-flight requests get to finish on shutdown. Default 25s.
    #[serde(with = "humantime_serde")]
    pub(crate) drain: Duration,
    /// This replica's id: every minted session id starts with `{replica_id}-`, so a load
    /// balancer can send each request to the replica that owns its session. Default empty.
    pub(crate) replica_id: String,
    /// `Host` names accepted (DNS-rebinding protection). Default: loopback names and the
    /// listen address. `"*"` accepts any.
    pub(crate) allowed_hosts: Vec<String>,
    /// `Origin`s accepted besides those whose host is an allowed host. `"*"` accepts any.
    pub(crate) allowed_origins: Vec<String>,
    /// Requests per second per principal (per client address without authentication);
    /// 0 turns the limit off. Default 0.
    pub(crate) rate_limit_per_second: u32,
    /// Burst allowed above the rate. Default 2 × the rate.
    pub(crate) rate_limit_burst: Option<u32>,
    /// TLS: the listener's certificate chain (PEM); with `tls_key`, the listener speaks
    /// HTTPS only.
    pub(crate) tls_cert: Option<PathBuf>,
    /// TLS: the certificate's private key (PEM).
    pub(crate) tls_key: Option<PathBuf>,
    /// TLS: require client certificates issued by these CAs (PEM).
    pub(crate) client_ca: Option<PathBuf>,
    /// How often the TLS files are checked for changes. Default 10s.
    #[serde(with = "humantime_serde")]
    pub(crate) tls_reload_interval: Duration,
    /// Time a client has to send a request's head; also how long an idle keep-alive
    /// connection is kept. Default 10s.
    #[serde(with = "humantime_serde")]
    pub(crate) header_timeout: Duration,
    /// Time a client has to send a request's body (408 beyond). Default 30s.
    #[serde(with = "humantime_serde")]
    pub(crate) body_timeout: Duration,
    /// Connections open at once. Default 4096.
    pub(crate) max_connections: usize,
    /// Connections open at once from one client address (0: no cap). Default 512.
    pub(crate) max_connections_per_client: usize,
    /// Connections below `max_connections` that serve only probes and existing sessions.
    /// Default 64.
    pub(crate) connection_reserve: usize,
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

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawServer {
    pub(crate) name: String,
    pub(crate) transport: Transport,
    pub(crate) url: Option<String>,
    #[serde(default)]
    pub(crate) headers: BTreeMap<String, String>,
    /// Headers whose values are read from environment variables (upstream credentials
    /// kept out of the file): header name → variable name.
    #[serde(default)]
    pub(crate) headers_env: BTreeMap<String, String>,
    #[serde(default)]
    pub(crate) command: Vec<String>,
    #[serde(default)]
    pub(crate) env: BTreeMap<String, String>,
    pub(crate) cwd: Option<String>,
    #[serde(default)]
    pub(crate) default: bool,
    /// HTTP transports: extra CA certificates (PEM) trusted besides the platform's.
    pub(crate) ca_file: Option<PathBuf>,
    /// HTTP transports: a client certificate (PEM) for mutual TLS.
    pub(crate) client_cert: Option<PathBuf>,
    /// HTTP transports: the client certificate's key (PEM).
    pub(crate) client_key: Option<PathBuf>,
    /// HTTP transports: accept any server certificate (tests only; logged loudly).
    #[serde(default)]
    pub(crate) dangerously_accept_invalid_certs: bool,
    /// HTTP transports: `"env"` (HTTPS_PROXY/HTTP_PROXY/NO_PROXY, the default), `"none"`,
    /// or a proxy URL.
    pub(crate) proxy: Option<String>,
    /// This server's sessions' idle timeout (default: `session.idle_timeout`).
    #[serde(default, with = "humantime_serde")]
    pub(crate) idle_timeout: Option<Duration>,
    /// Whether its idle sessions may be evicted when the gateway is full. Default: true
    /// for stdio, false for HTTP.
    pub(crate) evict_idle: Option<bool>,
    /// Its protocol era: `"auto"` (ask it with `server/discover`; the default),
    /// `"2025-11-25"` (session era only) or `"2026-07-28"`.
    pub(crate) protocol: Option<String>,
    /// Whether 2026-07-28 clients reach a session-era server through the era bridge.
    /// Default true.
    pub(crate) bridge: Option<bool>,
}

#[derive(Debug, Deserialize, Serialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Transport {
    Stdio,
    StreamableHttp,
    /// The legacy HTTP+SSE transport (2024-11-05).
    Sse,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawSession {
    #[serde(with = "humantime_serde")]
    pub(crate) idle_timeout: Duration,
    pub(crate) max_sessions: usize,
    pub(crate) max_sessions_per_principal: usize,
    pub(crate) max_inflight: usize,
    pub(crate) backlog: usize,
    /// Bytes of the session backlog. Default 4 MiB.
    pub(crate) backlog_bytes: usize,
    #[serde(with = "humantime_serde")]
    pub(crate) request_timeout: Duration,
    pub(crate) replay_events: usize,
    /// Bytes of each stream's replay log. Default 4 MiB.
    pub(crate) replay_bytes: usize,
    pub(crate) replay_streams: usize,
    /// 2026-07-28 requests in flight per principal (or client address). Default 256.
    pub(crate) max_inflight_per_principal: usize,
    /// Era bridge: upstream sessions per (principal, server, client capabilities).
    /// Default 4.
    pub(crate) bridge_sessions: usize,
    /// Era bridge: how long a call waits for its client's answer to `input_required`.
    /// Default 60s.
    #[serde(with = "humantime_serde")]
    pub(crate) input_timeout: Duration,
    /// Era bridge: calls waiting for their clients' answers at once. Default 1024.
    pub(crate) max_waiting_inputs: usize,
    /// Keys that seal the session ids of Streamable HTTP sessions, so that any replica
    /// with the keys serves any such session (no sticky routing). The first key seals,
    /// every key opens. Default none: ids are this replica's own.
    pub(crate) seal_keys: Vec<RawSealKey>,
    /// How long a sealed id of a session whose upstream keeps no session of its own
    /// (answers initialize without `Mcp-Session-Id`) opens for, from initialize. Default 1h.
    #[serde(with = "humantime_serde")]
    pub(crate) sealed_stateless_lifetime: Duration,
}

/// One key of `session.seal_keys`.
#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawSealKey {
    /// The key's id (1–32 of `A-Za-z0-9_-`), written in the clear in each id it seals.
    pub(crate) id: String,
    /// 32 bytes, base64 (`openssl rand -base64 32`), or
    pub(crate) secret: Option<String>,
    /// the environment variable that holds them, or
    pub(crate) secret_env: Option<String>,
    /// a file that holds them (read again on every reload: a mounted Kubernetes Secret
    /// rotates without a restart).
    pub(crate) secret_file: Option<PathBuf>,
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
            backlog_bytes: s.backlog_bytes,
            request_timeout: s.request_timeout,
            replay_events: s.replay_events,
            replay_bytes: s.replay_bytes,
            replay_streams: s.replay_streams,
            max_inflight_per_principal: FrontConfig::default().modern_inflight,
            bridge_sessions: s.bridge_sessions,
            input_timeout: FrontConfig::default().input_wait.0,
            max_waiting_inputs: FrontConfig::default().input_wait.1,
            seal_keys: Vec::new(),
            sealed_stateless_lifetime: Duration::from_secs(3600),
        }
    }
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawUpstream {
    #[serde(with = "humantime_serde")]
    pub(crate) connect_timeout: Duration,
    #[serde(with = "humantime_serde")]
    pub(crate) delete_timeout: Duration,
    #[serde(with = "humantime_serde")]
    pub(crate) exit_grace: Duration,
    pub(crate) max_line_bytes: usize,
    pub(crate) max_stdio_children: usize,
    /// How long a learned protocol era of an `auto` server is trusted. Default 10m.
    #[serde(with = "humantime_serde")]
    pub(crate) protocol_cache: Duration,
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
            protocol_cache: SessionConfig::default().era_ttl,
        }
    }
}
