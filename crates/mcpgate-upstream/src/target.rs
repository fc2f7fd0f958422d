//! [`Target`]: where a server lives and how it is reached.

use std::collections::BTreeMap;

use std::sync::Arc;

use crate::client::HttpOptions;
use crate::credential::{Auth, Credential, CredentialError};

/// Where a server lives and how it is reached. Comes from configuration, never from a
/// request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A Streamable HTTP endpoint.
    Http {
        /// The MCP endpoint URL.
        url: String,
        /// Extra headers sent on every upstream request (e.g. upstream credentials).
        headers: Vec<(String, String)>,
        /// TLS and proxy.
        http: HttpOptions,
        /// Where each session's `Authorization` comes from (`None`: only `headers`).
        auth: Option<Auth>,
    },
    /// A legacy HTTP+SSE server (protocol 2024-11-05): its SSE endpoint URL.
    LegacySse {
        /// The SSE endpoint URL (e.g. `http://host/sse`).
        url: String,
        /// Extra headers sent on every upstream request.
        headers: Vec<(String, String)>,
        /// TLS and proxy.
        http: HttpOptions,
        /// Where each session's `Authorization` comes from (`None`: only `headers`).
        auth: Option<Auth>,
    },
    /// A program speaking MCP on stdio; one process is started per client session.
    Stdio {
        /// Program and arguments.
        command: Vec<String>,
        /// Extra environment variables.
        env: BTreeMap<String, String>,
        /// Working directory.
        cwd: Option<String>,
        /// Start from an empty environment (only `env`) instead of the gateway's.
        env_clear: bool,
        /// Its sandbox and limits.
        contain: mcpgate_child::Containment,
        /// Children started ahead of their sessions (0: none).
        warm: usize,
    },
}

impl Target {
    /// The credential of `principal` toward this server, when its `Authorization` is
    /// not a static header.
    pub fn credential(
        &self,
        principal: Option<&str>,
    ) -> Result<Option<Arc<dyn Credential>>, CredentialError> {
        match self {
            Target::Http { auth, .. } | Target::LegacySse { auth, .. } => auth
                .as_ref()
                .map(|a| a.for_principal(principal))
                .transpose(),
            Target::Stdio { .. } => Ok(None),
        }
    }
}
