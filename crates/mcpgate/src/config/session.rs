//! `[session]`: the session table's limits and timeouts, the era bridge's, and the keys
//! that seal session ids.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use mcpgate_server::FrontConfig;
use mcpgate_session::SessionConfig;
use serde::{Deserialize, Serialize};

use super::check;

/// `[session]` as written.
#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct RawSession {
    /// A session with nothing in flight and no open stream is closed after this. Default
    /// 10m.
    #[serde(with = "humantime_serde")]
    pub(super) idle_timeout: Duration,
    /// Sessions at once; beyond, the longest-idle evictable one is evicted, else
    /// `initialize` gets 503. Default 10000.
    pub(super) max_sessions: usize,
    /// Sessions of one authenticated principal (at least 1). Default 1000.
    pub(super) max_sessions_per_principal: usize,
    /// Requests in flight per session. Default 64.
    pub(super) max_inflight: usize,
    /// Server messages buffered per session while no client stream can take them, and per
    /// client stream before a slow reader loses it. Default 256.
    pub(super) backlog: usize,
    /// Bytes of the session backlog. Default 4 MiB.
    pub(super) backlog_bytes: usize,
    /// A request without a response by then gets JSON-RPC error -32005. Default 5m.
    #[serde(with = "humantime_serde")]
    pub(super) request_timeout: Duration,
    /// Events kept per SSE stream for a client that resumes with `Last-Event-ID`. Default
    /// 256.
    pub(super) replay_events: usize,
    /// Bytes of each stream's replay log. Default 4 MiB.
    pub(super) replay_bytes: usize,
    /// Finished request streams per session whose events are kept. Default 8.
    pub(super) replay_streams: usize,
    /// 2026-07-28 requests in flight per principal (or client address). Default 256.
    pub(super) max_inflight_per_principal: usize,
    /// Era bridge: upstream sessions per (principal, server, client capabilities).
    /// Default 4.
    pub(super) bridge_sessions: usize,
    /// Era bridge: how long a call waits for its client's answer to `input_required`.
    /// Default 60s.
    #[serde(with = "humantime_serde")]
    pub(super) input_timeout: Duration,
    /// Era bridge: calls waiting for their clients' answers at once. Default 1024.
    pub(super) max_waiting_inputs: usize,
    /// Keys that seal the session ids of Streamable HTTP sessions, so that any replica
    /// with the keys serves any such session (no sticky routing). The first key seals,
    /// every key opens. Default none: ids are this replica's own.
    pub(super) seal_keys: Vec<RawSealKey>,
    /// How long a sealed id of a session whose upstream keeps no session of its own
    /// (answers initialize without `Mcp-Session-Id`) opens for, from initialize. Default 1h.
    #[serde(with = "humantime_serde")]
    pub(super) sealed_stateless_lifetime: Duration,
}

/// One key of `session.seal_keys`.
#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSealKey {
    /// The key's id (1–32 of `A-Za-z0-9_-`), written in the clear in each id it seals.
    pub(super) id: String,
    /// 32 bytes, base64 (`openssl rand -base64 32`), or
    pub(super) secret: Option<String>,
    /// the environment variable that holds them, or
    pub(super) secret_env: Option<String>,
    /// a file that holds them (read again on every reload: a mounted Kubernetes Secret
    /// rotates without a restart).
    pub(super) secret_file: Option<PathBuf>,
}

impl Default for RawSession {
    fn default() -> Self {
        let s = SessionConfig::default();
        let f = FrontConfig::default();
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
            max_inflight_per_principal: f.modern_inflight,
            bridge_sessions: s.bridge_sessions,
            input_timeout: f.input_wait.0,
            max_waiting_inputs: f.input_wait.1,
            seal_keys: Vec::new(),
            sealed_stateless_lifetime: Duration::from_secs(3600),
        }
    }
}

/// `[session]` checked.
#[derive(Debug)]
pub(super) struct Session {
    /// The session table's settings.
    pub(super) table: SessionConfig,
    /// The front's 2026-07-28 requests in flight per principal.
    pub(super) modern_inflight: usize,
    /// The front's wait for `input_required` answers: how long, how many at once.
    pub(super) input_wait: (Duration, usize),
    /// The keys that seal session ids (`None`: ids are not sealed).
    pub(super) seal_keys: Option<mcpgate_seal::KeyRing>,
    /// How long a stateless upstream's sealed id opens for.
    pub(super) sealed_stateless_lifetime: Duration,
}

impl RawSession {
    /// Checks the limits and reads the seal keys; `era_ttl` is `upstream.protocol_cache`.
    pub(super) fn validate(self, era_ttl: Duration) -> anyhow::Result<Session> {
        self.check_limits()?;
        let seal_keys = seal_keys(&self.seal_keys, "session.seal_keys")?;
        if seal_keys.is_some() && self.sealed_stateless_lifetime.is_zero() {
            bail!("session.sealed_stateless_lifetime must be above zero");
        }
        Ok(Session {
            table: SessionConfig {
                idle_timeout: self.idle_timeout,
                max_sessions: self.max_sessions,
                max_sessions_per_principal: self.max_sessions_per_principal,
                max_inflight: self.max_inflight,
                backlog: self.backlog,
                backlog_bytes: self.backlog_bytes,
                request_timeout: self.request_timeout,
                replay_events: self.replay_events,
                replay_bytes: self.replay_bytes,
                replay_streams: self.replay_streams,
                era_ttl,
                bridge_sessions: self.bridge_sessions,
                ..SessionConfig::default()
            },
            modern_inflight: self.max_inflight_per_principal,
            input_wait: (self.input_timeout, self.max_waiting_inputs),
            seal_keys,
            sealed_stateless_lifetime: self.sealed_stateless_lifetime,
        })
    }

    /// Timeouts above zero, counts at least 1.
    fn check_limits(&self) -> anyhow::Result<()> {
        if self.idle_timeout.is_zero() || self.request_timeout.is_zero() {
            bail!("session.idle_timeout and session.request_timeout must be above zero");
        }
        if self.bridge_sessions == 0 || self.max_waiting_inputs == 0 || self.input_timeout.is_zero()
        {
            bail!(
                "session.bridge_sessions, session.max_waiting_inputs and session.input_timeout must be above zero"
            );
        }
        if self.max_sessions_per_principal == 0 {
            bail!("session.max_sessions_per_principal must be at least 1");
        }
        if self.max_sessions == 0
            || self.max_inflight == 0
            || self.backlog == 0
            || self.replay_events == 0
            || self.replay_streams == 0
            || self.max_inflight_per_principal == 0
        {
            bail!("session.max_sessions, max_inflight and backlog must be at least 1");
        }
        Ok(())
    }
}

/// A key ring of `keys` (`None` when there is no key); `at` names them in errors.
pub(super) fn seal_keys(
    keys: &[RawSealKey],
    at: &str,
) -> anyhow::Result<Option<mcpgate_seal::KeyRing>> {
    if keys.is_empty() {
        return Ok(None);
    }
    let mut pairs = Vec::with_capacity(keys.len());
    for k in keys {
        let what = format!("{at} {:?}", k.id);
        let secret = check::secret(
            &what,
            k.secret.as_deref(),
            k.secret_env.as_deref(),
            k.secret_file.as_deref(),
        )?
        .with_context(|| format!("{what}: give one of secret, secret_env and secret_file"))?;
        pairs.push((k.id.clone(), secret));
    }
    mcpgate_seal::KeyRing::new(pairs)
        .map(Some)
        .with_context(|| at.to_owned())
}
