//! What configures the inspector backend: the token, the UI's origins, the allowlist and
//! the UI's defaults.

use std::collections::BTreeMap;

use reqwest::Url;

use crate::error::InspectorError;
use crate::policy::{self, StdioRule, UrlRule};

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
    /// The arguments, as the UI's single string (see `quote_args`).
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
    /// Checks the UI origins, the token and the allowlist.
    pub fn validate(&self) -> Result<(), InspectorError> {
        if self.ui_origins.is_empty() {
            return Err(InspectorError::NoUiOrigin);
        }
        for o in &self.ui_origins {
            check_origin(o)?;
        }
        if let ProxyAuth::Token(t) = &self.auth
            && t.len() < 16
        {
            return Err(InspectorError::ShortToken);
        }
        policy::validate(&self.stdio, &self.urls, &self.base_env)?;
        Ok(())
    }
}

/// A UI origin must be exactly `http(s)://host[:port]`.
fn check_origin(o: &str) -> Result<(), InspectorError> {
    let u = Url::parse(o).map_err(|source| InspectorError::UiOriginUrl {
        origin: o.to_owned(),
        source,
    })?;
    if !matches!(u.scheme(), "http" | "https") || u.host_str().is_none() {
        return Err(InspectorError::UiOriginScheme {
            origin: o.to_owned(),
        });
    }
    let expected = u.origin().ascii_serialization();
    if normalize_origin(o) != expected {
        return Err(InspectorError::UiOriginNotBare {
            origin: o.to_owned(),
            expected,
        });
    }
    Ok(())
}

/// An origin as compared: trimmed, without a trailing `/`, lower-cased.
pub(crate) fn normalize_origin(o: &str) -> String {
    o.trim().trim_end_matches('/').to_ascii_lowercase()
}
