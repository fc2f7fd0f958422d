//! `[admin]`: the admin API and dashboard's listener, its token and its TLS files. Off
//! unless the section is present.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};

use super::tls::{ListenerTls, listener_tls};

/// `[admin]` as written.
#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct RawAdmin {
    /// Listen address of the admin API and dashboard. Default `127.0.0.1:8081`.
    pub(super) addr: String,
    /// The admin bearer token. Default: read from the variable named by `token_env`, or
    /// else generated at start and printed once.
    pub(super) token: Option<String>,
    /// An environment variable holding the admin token.
    pub(super) token_env: Option<String>,
    /// TLS: the admin listener's certificate chain (PEM).
    pub(super) tls_cert: Option<PathBuf>,
    /// TLS: its private key (PEM).
    pub(super) tls_key: Option<PathBuf>,
    /// TLS: require client certificates issued by these CAs (PEM).
    pub(super) client_ca: Option<PathBuf>,
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

/// The admin listener.
#[derive(Debug)]
pub(crate) struct AdminListener {
    pub(crate) addr: SocketAddr,
    /// The bearer token (`None`: generate one at start).
    pub(crate) token: Option<String>,
    pub(crate) tls: Option<ListenerTls>,
}

impl RawAdmin {
    /// Checks the address, the token and the TLS files (reloaded every `reload_every`,
    /// `listen.tls_reload_interval`).
    pub(super) fn validate(
        self,
        reload_every: Duration,
        warnings: &mut Vec<String>,
    ) -> anyhow::Result<AdminListener> {
        let addr: SocketAddr = self
            .addr
            .parse()
            .with_context(|| format!("admin.addr: {:?} is not an IP:port address", self.addr))?;
        let token = match (&self.token, &self.token_env) {
            (Some(t), _) => Some(t.clone()),
            (None, Some(var)) => Some(
                std::env::var(var).with_context(|| format!("admin.token_env: {var} is not set"))?,
            ),
            (None, None) => None,
        };
        if token.as_ref().is_some_and(|t| t.len() < 16) {
            bail!("admin token must be at least 16 characters");
        }
        let tls = listener_tls(
            "admin",
            self.tls_cert,
            self.tls_key,
            self.client_ca,
            reload_every,
            warnings,
        )?;
        Ok(AdminListener { addr, token, tls })
    }
}
