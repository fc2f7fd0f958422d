//! The runtime form of the configuration: guards, allowlist, defaults, principal.

use std::sync::Arc;

use tracing::warn;

use crate::config::{InspectorConfig, InspectorDefaults, Protocol, ProxyAuth, normalize_origin};
use crate::error::{InspectorError, chain};
use crate::guard::Guard;
use crate::policy::{self, Policy};
use crate::v2::state::V2;

/// The runtime form of [`InspectorConfig`]: the front's fallback in inspector mode
/// (`Front::with_fallback`).
pub struct Inspector {
    pub(crate) guard: Guard,
    pub(crate) policy: Policy,
    pub(crate) defaults: InspectorDefaults,
    /// The principal of every inspector session (one token, one principal).
    pub(crate) who: Option<Arc<str>>,
    /// The v2 protocol's state (`None`: the v1 protocol).
    pub(crate) v2: Option<V2>,
}

impl std::fmt::Debug for Inspector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inspector")
            .field("guard", &self.guard)
            .finish_non_exhaustive()
    }
}

impl Inspector {
    /// Builds the runtime form. A configuration that does not validate leaves the
    /// allowlist empty (everything refused) and is logged.
    pub fn new(cfg: InspectorConfig) -> Result<Self, InspectorError> {
        let urls = match policy::validate(&cfg.stdio, &cfg.urls, &cfg.base_env) {
            Ok(u) => u,
            Err(e) => {
                warn!(
                    "inspector allowlist invalid, refusing every target: {}",
                    chain(&e)
                );
                Vec::new()
            }
        };
        let (token, who) = match cfg.auth {
            ProxyAuth::Token(t) => (Some(t.into_bytes()), Some(Arc::from("inspector"))),
            ProxyAuth::DangerouslyDisabled => (None, None),
        };
        let v2 = match &cfg.protocol {
            Protocol::V1 => None,
            Protocol::V2 { ui, fetch_allow } => {
                let token = token.as_deref().and_then(|t| std::str::from_utf8(t).ok());
                Some(V2::new(ui, token, fetch_allow.clone())?)
            }
        };
        Ok(Inspector {
            v2,
            guard: Guard {
                token,
                origins: cfg.ui_origins.iter().map(|o| normalize_origin(o)).collect(),
            },
            policy: Policy {
                stdio: cfg.stdio,
                urls,
                base_env: cfg.base_env,
            },
            defaults: cfg.defaults,
            who,
        })
    }
}
