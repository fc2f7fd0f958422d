//! The `mcpgate inspector` config file as written (TOML; unknown keys refused), with
//! its defaults.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use mcpgate_session::SessionConfig;
use mcpgate_upstream::Timeouts;
use serde::Deserialize;

/// What a spawned command inherits from the gateway unless configured otherwise (what the
/// Inspector's own proxy calls its default environment).
const DEFAULT_INHERIT_ENV: [&str; 6] = ["HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"];

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct RawInspector {
    pub(super) listen: Option<String>,
    pub(super) protocol: Option<String>,
    pub(super) ui: Option<PathBuf>,
    pub(super) fetch_allow: Vec<String>,
    pub(super) ui_origins: Vec<String>,
    pub(super) ui_url: Option<String>,
    pub(super) token: Option<String>,
    pub(super) token_env: Option<String>,
    /// Variables passed from the gateway's environment to spawned commands.
    pub(super) inherit_env: Vec<String>,
    #[serde(with = "humantime_serde")]
    pub(super) idle_timeout: Duration,
    #[serde(with = "humantime_serde")]
    pub(super) request_timeout: Duration,
    #[serde(with = "humantime_serde")]
    pub(super) keep_alive: Duration,
    #[serde(with = "humantime_serde")]
    pub(super) exit_grace: Duration,
    pub(super) max_sessions: usize,
    pub(super) defaults: Option<RawDefaults>,
    pub(super) stdio: Vec<RawStdio>,
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

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawDefaults {
    pub(super) transport: Option<String>,
    pub(super) command: Option<String>,
    #[serde(default)]
    pub(super) args: Vec<String>,
    pub(super) server_url: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawStdio {
    pub(super) name: Option<String>,
    pub(super) command: String,
    /// One pattern per argument (`*`, `?`; `\` escapes).
    #[serde(default)]
    pub(super) args: Vec<String>,
    #[serde(default)]
    pub(super) env: BTreeMap<String, String>,
    #[serde(default)]
    pub(super) allow_env: Vec<String>,
    pub(super) cwd: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawUrl {
    pub(super) name: Option<String>,
    pub(super) prefix: String,
    /// `streamable-http`, `sse`; default both.
    pub(super) transports: Option<Vec<String>>,
    #[serde(default)]
    pub(super) headers: BTreeMap<String, String>,
    #[serde(default)]
    pub(super) headers_env: BTreeMap<String, String>,
    #[serde(default = "yes")]
    pub(super) forward_headers: bool,
}

fn yes() -> bool {
    true
}
