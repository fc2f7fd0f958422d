//! What configures the inspector backend: the token, the UI's origins, the allowlist and
//! the UI's defaults.

use std::collections::BTreeMap;

use reqwest::Url;

use crate::policy::{self, StdioRule, UrlRule};

/// What is wrong with an [`InspectorConfig`].
#[derive(Debug, thiserror::Error)]
pub enum InspectorError {
    /// The configuration does not validate; the message says why.
    #[error("{0}")]
    Config(String),
    /// The v2 UI's files could not be read.
    #[error("the Inspector UI: {0}")]
    Ui(String),
}

/// The header the Inspector UI carries its proxy session token in.
pub const TOKEN_HEADER: &str = "x-mcp-proxy-auth";

/// How callers prove they may use the proxy.
#[derive(Clone)]
pub enum ProxyAuth {
    /// `X-MCP-Proxy-Auth: Bearer <token>` on every request but `/health`.
    Token(String),
    /// No token at all. Only ever from an explicit option; requests must then carry an
    /// allowed `Origin`.
    DangerouslyDisabled,
}

impl std::fmt::Debug for ProxyAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProxyAuth::Token(_) => f.write_str("Token(<redacted>)"),
            ProxyAuth::DangerouslyDisabled => f.write_str("DangerouslyDisabled"),
        }
    }
}

/// What `GET /config` tells the UI to prefill.
#[derive(Debug, Clone, Default)]
pub struct InspectorDefaults {
    /// `stdio`, `sse` or `streamable-http`.
    pub transport: Option<String>,
    /// The command.
    pub command: Option<String>,
    /// The arguments, as the UI's single string (see [`quote_args`]).
    pub args: Option<String>,
    /// The server URL.
    pub server_url: Option<String>,
}

/// The configuration of Inspector-proxy mode.
#[derive(Debug, Clone)]
pub struct InspectorConfig {
    /// The token check.
    pub auth: ProxyAuth,
    /// The origins the UI is served from (`http://localhost:6274`); others get 403.
    pub ui_origins: Vec<String>,
    /// The stdio commands callers may start.
    pub stdio: Vec<StdioRule>,
    /// The upstream URLs callers may open.
    pub urls: Vec<UrlRule>,
    /// The environment every spawned command starts from (the gateway's own environment is
    /// never passed on): name → value.
    pub base_env: BTreeMap<String, String>,
    /// What `/config` answers.
    pub defaults: InspectorDefaults,
    /// The protocol the backend speaks.
    pub protocol: Protocol,
}

/// The Inspector protocol the backend speaks.
#[derive(Debug, Clone)]
pub enum Protocol {
    /// Inspector 1.x: the UI is served elsewhere and calls this proxy cross-origin.
    V1,
    /// Inspector 2.x: this backend serves the UI (its `clients/web/dist`) and its
    /// same-origin `/api/`.
    V2 {
        /// The UI's directory.
        ui: std::path::PathBuf,
        /// Ranges `/api/fetch` may reach although not public.
        fetch_allow: crate::ssrf::FetchAllow,
    },
}

impl InspectorConfig {
    /// Checks the allowlist; the message says what is wrong.
    pub fn validate(&self) -> Result<(), InspectorError> {
        self.check().map_err(InspectorError::Config)
    }

    fn check(&self) -> Result<(), String> {
        if self.ui_origins.is_empty() {
            return Err("at least one UI origin is needed".into());
        }
        for o in &self.ui_origins {
            let u = Url::parse(o).map_err(|e| format!("UI origin {o:?}: {e}"))?;
            if !matches!(u.scheme(), "http" | "https") || u.host_str().is_none() {
                return Err(format!("UI origin {o:?} must be http(s)://host[:port]"));
            }
            if normalize_origin(o) != u.origin().ascii_serialization() {
                return Err(format!(
                    "UI origin {o:?} must be just scheme://host[:port] (e.g. {})",
                    u.origin().ascii_serialization()
                ));
            }
        }
        if let ProxyAuth::Token(t) = &self.auth
            && t.len() < 16
        {
            return Err("the proxy token must be at least 16 characters".into());
        }
        policy::validate(&self.stdio, &self.urls, &self.base_env).map(|_| ())
    }
}

pub(crate) fn normalize_origin(o: &str) -> String {
    o.trim().trim_end_matches('/').to_ascii_lowercase()
}
