//! `[auth]`: client authentication — static bearer tokens (with their principals' groups)
//! and JWT access tokens of an OAuth 2.1 authorization server. Off unless the section is
//! present.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use mcpgate_server::{AuthConfig, JwtConfig, StaticToken};
use serde::{Deserialize, Serialize};

use super::check;

/// `[auth]` as written.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct RawAuth {
    /// Static bearer tokens (API keys).
    pub(super) tokens: Vec<RawToken>,
    /// JWT access tokens of an OAuth 2.1 authorization server.
    pub(super) jwt: Option<RawJwt>,
}

/// One `[[auth.tokens]]`.
#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawToken {
    /// The principal's name.
    pub(super) name: String,
    /// The token itself, or
    pub(super) token: Option<String>,
    /// the environment variable that holds it.
    pub(super) token_env: Option<String>,
    /// The principal's groups, for virtual servers' access rules.
    #[serde(default)]
    pub(super) groups: Vec<String>,
}

/// `[auth.jwt]`.
#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawJwt {
    /// The tokens' issuer (`iss`).
    pub(super) issuer: String,
    /// This gateway's resource identifier; tokens for any other audience are refused.
    pub(super) audience: String,
    /// Where the issuer's signing keys are.
    pub(super) jwks_url: String,
    /// Scopes every token must carry. Default none.
    #[serde(default)]
    pub(super) required_scopes: Vec<String>,
    /// How often the keys are fetched again. Default 10m.
    #[serde(default = "default_jwks_refresh", with = "humantime_serde")]
    pub(super) jwks_refresh: Duration,
    /// The canonical resource URL for RFC 9728 metadata; default: the audience.
    pub(super) resource: Option<String>,
    /// Extra CA certificates (PEM) for the JWKS endpoint.
    pub(super) ca_file: Option<PathBuf>,
}

fn default_jwks_refresh() -> Duration {
    Duration::from_secs(600)
}

/// `[auth]` checked (without the section: no authentication).
pub(super) fn validate(a: Option<RawAuth>) -> anyhow::Result<AuthConfig> {
    let Some(a) = a else {
        return Ok(AuthConfig::default());
    };
    let tokens = a
        .tokens
        .into_iter()
        .map(RawToken::validate)
        .collect::<anyhow::Result<Vec<_>>>()?;
    let jwt = a.jwt.map(RawJwt::validate).transpose()?;
    let cfg = AuthConfig {
        tokens,
        jwt,
        verified: None,
    };
    if !cfg.is_enabled() {
        bail!("[auth] is present but configures neither tokens nor jwt");
    }
    Ok(cfg)
}

/// Each static token principal's groups (for virtual servers' access rules).
pub(super) fn groups(a: Option<&RawAuth>) -> HashMap<String, Vec<String>> {
    a.map(|a| {
        a.tokens
            .iter()
            .filter(|t| !t.groups.is_empty())
            .map(|t| (format!("token:{}", t.name), t.groups.clone()))
            .collect()
    })
    .unwrap_or_default()
}

impl RawToken {
    /// The token, read; at least 16 characters.
    fn validate(self) -> anyhow::Result<StaticToken> {
        let what = format!("auth.tokens {:?}", self.name);
        let token = check::secret(
            &what,
            self.token.as_deref(),
            self.token_env.as_deref(),
            None,
        )?
        .with_context(|| format!("{what}: give one of token and token_env"))?;
        if token.len() < 16 {
            bail!(
                "auth.tokens {:?}: a token must be at least 16 characters",
                self.name
            );
        }
        Ok(StaticToken {
            name: self.name,
            token,
        })
    }
}

impl RawJwt {
    /// The JWKS URL and its CA file checked.
    fn validate(self) -> anyhow::Result<JwtConfig> {
        check::url("auth.jwt.jwks_url", &self.jwks_url)?;
        let tls = mcpgate_tls::ClientOptions {
            ca_file: self.ca_file,
            ..Default::default()
        };
        tls.check().context("auth.jwt.ca_file")?;
        Ok(JwtConfig {
            resource: self.resource.unwrap_or_else(|| self.audience.clone()),
            issuer: self.issuer,
            audience: self.audience,
            jwks_url: self.jwks_url,
            required_scopes: self.required_scopes,
            jwks_refresh: self.jwks_refresh,
            tls,
        })
    }
}
