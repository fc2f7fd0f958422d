//! The `mcpgate inspector` config file as written (TOML; unknown keys refused), with its
//! defaults, its checks and what each part becomes: allowlist rules, the UI's defaults,
//! the base environment, the session limits.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use mcpgate_session::SessionConfig;
use mcpgate_upstream::Timeouts;
use serde::Deserialize;

use super::allowlist::name_of;
use crate::args::quote_args;
use crate::config::InspectorDefaults;
use crate::error::SetupError;
use crate::policy::{StdioRule, UrlRule};

/// What a spawned command inherits from the gateway unless configured otherwise (what the
/// Inspector's own proxy calls its default environment).
const DEFAULT_INHERIT_ENV: [&str; 6] = ["HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"];
/// The transports of a `[[url]]` entry, and its default.
const URL_TRANSPORTS: [&str; 2] = ["streamable-http", "sse"];

/// The whole file. Every key is optional; the command line overrides the ones it also has.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct RawInspector {
    /// Listen address (loopback only). Default `127.0.0.1:6274` (v2), `127.0.0.1:6277`
    /// (v1).
    pub(super) listen: Option<String>,
    /// `v2` (the default) or `v1`.
    pub(super) protocol: Option<String>,
    /// v2: the UI's directory. Default: found under the current directory.
    pub(super) ui: Option<PathBuf>,
    /// v2: ranges `/api/fetch` may reach although not public. Default none.
    pub(super) fetch_allow: Vec<String>,
    /// The origins the UI is served from. Default: v2's own address; for v1
    /// `http://localhost:6274` and `http://127.0.0.1:6274`.
    pub(super) ui_origins: Vec<String>,
    /// The UI's URL for the printed link. Default: the first UI origin.
    pub(super) ui_url: Option<String>,
    /// The session token (at least 16 characters), or
    pub(super) token: Option<String>,
    /// the variable that holds it. Default: `MCPGATE_INSPECTOR_TOKEN`, else generated.
    pub(super) token_env: Option<String>,
    /// Variables passed from the gateway's environment to spawned commands. Default
    /// `HOME`, `LOGNAME`, `PATH`, `SHELL`, `TERM`, `USER`.
    pub(super) inherit_env: Vec<String>,
    /// A session's idle timeout. Default: the session table's.
    #[serde(with = "humantime_serde")]
    pub(super) idle_timeout: Duration,
    /// A request's timeout. Default: the session table's.
    #[serde(with = "humantime_serde")]
    pub(super) request_timeout: Duration,
    /// SSE keep-alive comment interval. Default 15s.
    #[serde(with = "humantime_serde")]
    pub(super) keep_alive: Duration,
    /// Time a stdio child gets to exit before it is killed. Default: the upstream's.
    #[serde(with = "humantime_serde")]
    pub(super) exit_grace: Duration,
    /// Sessions at once. Default 64.
    pub(super) max_sessions: usize,
    /// What the UI prefills. Default: the first literal stdio rule, else the first URL.
    pub(super) defaults: Option<RawDefaults>,
    /// The stdio commands callers may start.
    pub(super) stdio: Vec<RawStdio>,
    /// The upstream URL prefixes callers may open.
    pub(super) url: Vec<RawUrl>,
}

impl Default for RawInspector {
    fn default() -> Self {
        let s = SessionConfig::default();
        RawInspector {
            listen: None,
            protocol: None,
            ui: None,
            fetch_allow: Vec::new(),
            ui_origins: Vec::new(),
            ui_url: None,
            token: None,
            token_env: None,
            inherit_env: DEFAULT_INHERIT_ENV
                .iter()
                .map(|s| (*s).to_owned())
                .collect(),
            idle_timeout: s.idle_timeout,
            request_timeout: s.request_timeout,
            keep_alive: Duration::from_secs(15),
            exit_grace: Timeouts::default().exit_grace,
            max_sessions: 64,
            defaults: None,
            stdio: Vec::new(),
            url: Vec::new(),
        }
    }
}

/// `[defaults]`: what `/config` tells the UI to prefill.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawDefaults {
    /// `stdio`, `sse` or `streamable-http`.
    pub(super) transport: Option<String>,
    /// The command.
    pub(super) command: Option<String>,
    /// Its arguments.
    #[serde(default)]
    pub(super) args: Vec<String>,
    /// The server URL.
    pub(super) server_url: Option<String>,
}

/// One `[[stdio]]`: a command callers may start.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawStdio {
    /// For logs. Default: from the command's file name.
    pub(super) name: Option<String>,
    /// The program, exactly as the UI sends it.
    pub(super) command: String,
    /// One pattern per argument (`*`, `?`; `\` escapes).
    #[serde(default)]
    pub(super) args: Vec<String>,
    /// Variables always set for it.
    #[serde(default)]
    pub(super) env: BTreeMap<String, String>,
    /// Variables the caller may set.
    #[serde(default)]
    pub(super) allow_env: Vec<String>,
    /// Its working directory. Default: the gateway's.
    pub(super) cwd: Option<String>,
}

/// One `[[url]]`: upstream URLs callers may open.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawUrl {
    /// For logs. Default `url{index}`.
    pub(super) name: Option<String>,
    /// `scheme://host[:port]/path`.
    pub(super) prefix: String,
    /// `streamable-http`, `sse`; default both.
    pub(super) transports: Option<Vec<String>>,
    /// Headers sent on every upstream request.
    #[serde(default)]
    pub(super) headers: BTreeMap<String, String>,
    /// Headers whose values are read from environment variables: header → variable.
    #[serde(default)]
    pub(super) headers_env: BTreeMap<String, String>,
    /// Whether the UI's own upstream headers are sent upstream. Default true.
    #[serde(default = "yes")]
    pub(super) forward_headers: bool,
}

fn yes() -> bool {
    true
}

impl RawInspector {
    /// The file at `path`, or every default without one.
    pub(super) fn load(path: Option<&Path>) -> Result<Self, SetupError> {
        let Some(path) = path else {
            return Ok(RawInspector::default());
        };
        let text = std::fs::read_to_string(path).map_err(|source| SetupError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        toml::from_str(&text).map_err(|source| SetupError::Parse {
            path: path.to_path_buf(),
            source,
        })
    }

    /// The `[[stdio]]` entries as rules.
    pub(super) fn stdio_rules(&self) -> Result<Vec<StdioRule>, SetupError> {
        self.stdio
            .iter()
            .enumerate()
            .map(|(index, s)| s.rule(index))
            .collect()
    }

    /// The `[[url]]` entries as rules.
    pub(super) fn url_rules(&self) -> Result<Vec<UrlRule>, SetupError> {
        self.url
            .iter()
            .enumerate()
            .map(|(index, u)| u.rule(index))
            .collect()
    }

    /// `[defaults]`, if the file has it.
    pub(super) fn defaults(&self) -> Option<InspectorDefaults> {
        self.defaults.as_ref().map(|d| InspectorDefaults {
            transport: d.transport.clone(),
            command: d.command.clone(),
            args: Some(quote_args(&d.args)).filter(|a| !a.is_empty()),
            server_url: d.server_url.clone(),
        })
    }

    /// The environment every spawned command starts from: the `inherit_env` variables
    /// that are set.
    pub(super) fn base_env(&self) -> Result<BTreeMap<String, String>, SetupError> {
        if let Some(name) = self
            .inherit_env
            .iter()
            .find(|k| k.is_empty() || !k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'))
        {
            return Err(SetupError::InheritEnv { name: name.clone() });
        }
        Ok(self
            .inherit_env
            .iter()
            .filter_map(|k| std::env::var(k).ok().map(|v| (k.clone(), v)))
            .collect())
    }

    /// The session table's limits, the upstream timeouts and the keep-alive interval.
    pub(super) fn limits(&self) -> Result<(SessionConfig, Timeouts, Duration), SetupError> {
        if self.max_sessions == 0 || self.idle_timeout.is_zero() || self.request_timeout.is_zero() {
            return Err(SetupError::ZeroLimit);
        }
        if self.keep_alive.is_zero() {
            return Err(SetupError::ZeroKeepAlive);
        }
        let session = SessionConfig {
            idle_timeout: self.idle_timeout,
            max_sessions: self.max_sessions,
            request_timeout: self.request_timeout,
            ..SessionConfig::default()
        };
        let timeouts = Timeouts {
            request: self.request_timeout,
            exit_grace: self.exit_grace,
            ..Timeouts::default()
        };
        Ok((session, timeouts, self.keep_alive))
    }
}

impl RawStdio {
    /// The rule; `index` names the entry in errors.
    fn rule(&self, index: usize) -> Result<StdioRule, SetupError> {
        if self.name.as_ref().is_some_and(|n| n.is_empty()) {
            return Err(SetupError::StdioName { index });
        }
        Ok(StdioRule {
            name: self.name.clone().unwrap_or_else(|| name_of(&self.command)),
            command: self.command.clone(),
            args: self.args.clone(),
            env: self.env.clone(),
            allow_env: self.allow_env.clone(),
            cwd: self.cwd.clone(),
        })
    }
}

impl RawUrl {
    /// The rule, its `headers_env` read; `index` names the entry in errors.
    fn rule(&self, index: usize) -> Result<UrlRule, SetupError> {
        let transports = self
            .transports
            .clone()
            .unwrap_or_else(|| URL_TRANSPORTS.map(str::to_owned).to_vec());
        if let Some(t) = transports
            .iter()
            .find(|t| !URL_TRANSPORTS.contains(&t.as_str()))
        {
            return Err(SetupError::UrlTransport {
                index,
                transport: t.clone(),
            });
        }
        let mut headers: Vec<(String, String)> = self
            .headers
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for (name, var) in &self.headers_env {
            let value = std::env::var(var).map_err(|source| SetupError::HeaderEnv {
                index,
                header: name.clone(),
                var: var.clone(),
                source,
            })?;
            headers.push((name.clone(), value));
        }
        Ok(UrlRule {
            name: self.name.clone().unwrap_or_else(|| format!("url{index}")),
            prefix: self.prefix.clone(),
            streamable_http: transports.iter().any(|t| t == "streamable-http"),
            sse: transports.iter().any(|t| t == "sse"),
            headers,
            forward_headers: self.forward_headers,
        })
    }
}
