//! `[[server]]` entries → [`ServerSpec`]s: names, transports, URLs, headers, upstream TLS,
//! proxies, protocol eras.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use mcpgate_session::{Protocol, ServerSpec};
use mcpgate_upstream::{HttpOptions, ProxyMode, Target};
use serde::{Deserialize, Serialize};

use super::check;
use super::oauth::RawOAuth;
use super::stdio::{RawLimits, RawSandbox};

/// One `[[server]]` as written.
#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawServer {
    /// Its name: mounted at `/servers/{name}/mcp`, and its metric label.
    pub(super) name: String,
    /// How it is reached.
    pub(super) transport: Transport,
    /// HTTP transports: the upstream endpoint.
    pub(super) url: Option<String>,
    /// HTTP transports: sent on every upstream request.
    #[serde(default)]
    pub(super) headers: BTreeMap<String, String>,
    /// Headers whose values are read from environment variables (upstream credentials
    /// kept out of the file): header name → variable name.
    #[serde(default)]
    pub(super) headers_env: BTreeMap<String, String>,
    /// Stdio: the program and its arguments.
    #[serde(default)]
    pub(super) command: Vec<String>,
    /// Stdio: extra environment (the child also inherits mcpgate's).
    #[serde(default)]
    pub(super) env: BTreeMap<String, String>,
    /// Stdio: the working directory. Default: mcpgate's.
    pub(super) cwd: Option<String>,
    /// Stdio: run each child in a bubblewrap sandbox (see `stdio.rs`).
    pub(super) sandbox: Option<RawSandbox>,
    /// Stdio: bounds on each child (see `stdio.rs`).
    pub(super) limits: Option<RawLimits>,
    /// Stdio: children started ahead of their sessions. Default 0.
    pub(super) warm: Option<usize>,
    /// Also mounted at `/mcp`. Default false.
    #[serde(default)]
    pub(super) default: bool,
    /// HTTP transports: extra CA certificates (PEM) trusted besides the platform's.
    pub(super) ca_file: Option<PathBuf>,
    /// HTTP transports: a client certificate (PEM) for mutual TLS.
    pub(super) client_cert: Option<PathBuf>,
    /// HTTP transports: the client certificate's key (PEM).
    pub(super) client_key: Option<PathBuf>,
    /// HTTP transports: accept any server certificate (tests only; logged loudly).
    #[serde(default)]
    pub(super) dangerously_accept_invalid_certs: bool,
    /// HTTP transports: `"env"` (HTTPS_PROXY/HTTP_PROXY/NO_PROXY, the default), `"none"`,
    /// or a proxy URL.
    pub(super) proxy: Option<String>,
    /// This server's sessions' idle timeout (default: `session.idle_timeout`).
    #[serde(default, with = "humantime_serde")]
    pub(super) idle_timeout: Option<Duration>,
    /// Whether its idle sessions may be evicted when the gateway is full. Default: true
    /// for stdio, false for HTTP.
    pub(super) evict_idle: Option<bool>,
    /// Its protocol era: `"auto"` (ask it with `server/discover`; the default),
    /// `"2025-11-25"` (session era only) or `"2026-07-28"`.
    pub(super) protocol: Option<String>,
    /// Whether 2026-07-28 clients reach a session-era server through the era bridge.
    /// Default true.
    pub(super) bridge: Option<bool>,
    /// HTTP transports: how the gateway gets the server's OAuth tokens (see `oauth.rs`).
    pub(super) oauth: Option<RawOAuth>,
}

/// A `[[server]]`'s transport.
#[derive(Debug, Deserialize, Serialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub(super) enum Transport {
    /// A child process on stdin/stdout.
    Stdio,
    /// Streamable HTTP.
    StreamableHttp,
    /// The legacy HTTP+SSE transport (2024-11-05).
    Sse,
}

impl RawServer {
    /// The one server of a command line (`--upstream URL`, `-- CMD`): the default.
    pub(super) fn single(
        target: Target,
        env: BTreeMap<String, String>,
        cwd: Option<String>,
    ) -> Self {
        let (transport, url, command) = match target {
            Target::Http { url, .. } => (Transport::StreamableHttp, Some(url), Vec::new()),
            Target::LegacySse { url, .. } => (Transport::Sse, Some(url), Vec::new()),
            Target::Stdio { command, .. } => (Transport::Stdio, None, command),
        };
        RawServer {
            name: "default".into(),
            transport,
            url,
            headers: BTreeMap::new(),
            headers_env: BTreeMap::new(),
            command,
            env,
            cwd,
            sandbox: None,
            limits: None,
            warm: None,
            default: true,
            ca_file: None,
            client_cert: None,
            client_key: None,
            dangerously_accept_invalid_certs: false,
            proxy: None,
            idle_timeout: None,
            evict_idle: None,
            protocol: None,
            bridge: None,
            oauth: None,
        }
    }

    /// Validates the server; `at` names it in errors; warnings go to `warnings`.
    pub(super) fn validate(
        self,
        at: &str,
        warnings: &mut Vec<String>,
    ) -> anyhow::Result<ServerSpec> {
        check::name(at, &self.name)?;
        let target = match self.transport {
            Transport::StreamableHttp | Transport::Sse => self.http_target(at, warnings)?,
            Transport::Stdio => self.stdio_target(at)?,
        };
        if self.idle_timeout.is_some_and(|d| d.is_zero()) {
            bail!("{at}: idle_timeout must be above zero");
        }
        let protocol = protocol(at, self.protocol.as_deref())?;
        let mut spec = ServerSpec::new(self.name, target);
        spec.protocol = protocol;
        spec.bridge = self.bridge.unwrap_or(true);
        spec.idle_timeout = self.idle_timeout;
        if let Some(e) = self.evict_idle {
            spec.evict_idle = e;
        }
        Ok(spec)
    }

    /// A Streamable HTTP or legacy SSE target: a URL, headers, TLS options, a proxy, and
    /// none of the stdio keys.
    fn http_target(&self, at: &str, warnings: &mut Vec<String>) -> anyhow::Result<Target> {
        let Some(url) = self.url.clone() else {
            bail!("{at}: transport \"streamable-http\" and \"sse\" need url")
        };
        check::url(&format!("{at}: url"), &url)?;
        if !self.command.is_empty()
            || !self.env.is_empty()
            || self.cwd.is_some()
            || self.sandbox.is_some()
            || self.limits.is_some()
            || self.warm.is_some()
        {
            bail!("{at}: command, env, cwd, sandbox, limits and warm are for transport \"stdio\"");
        }
        let headers = self.headers(at)?;
        let tls = self.client_tls(at, &url, warnings)?;
        let auth = match &self.oauth {
            Some(o)
                if headers
                    .iter()
                    .any(|(k, _)| k.eq_ignore_ascii_case("authorization")) =>
            {
                bail!("{at}: headers set Authorization, which oauth gives; drop one of them")
            }
            Some(o) => Some(o.validate(at, &self.name, &url, &tls)?),
            None => None,
        };
        let http = HttpOptions {
            tls,
            proxy: self.proxy(at)?,
        };
        Ok(if self.transport == Transport::Sse {
            Target::LegacySse {
                url,
                headers,
                http,
                auth,
            }
        } else {
            Target::Http {
                url,
                headers,
                http,
                auth,
            }
        })
    }

    /// `headers`, then `headers_env` with each variable read.
    fn headers(&self, at: &str) -> anyhow::Result<Vec<(String, String)>> {
        let mut headers: Vec<(String, String)> = self
            .headers
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for (name, var) in &self.headers_env {
            let value = std::env::var(var)
                .with_context(|| format!("{at}: headers_env.{name}: {var} is not set"))?;
            headers.push((name.clone(), value));
        }
        Ok(headers)
    }

    /// The upstream TLS options, their files loaded; switching verification off is a
    /// warning (two for an `http://` URL, where it does nothing).
    fn client_tls(
        &self,
        at: &str,
        url: &str,
        warnings: &mut Vec<String>,
    ) -> anyhow::Result<mcpgate_tls::ClientOptions> {
        let tls = mcpgate_tls::ClientOptions {
            ca_file: self.ca_file.clone(),
            client_cert: self.client_cert.clone(),
            client_key: self.client_key.clone(),
            dangerously_accept_invalid_certs: self.dangerously_accept_invalid_certs,
        };
        tls.check().with_context(|| format!("{at}: TLS"))?;
        if tls.dangerously_accept_invalid_certs {
            warnings.push(format!(
                "{at}: dangerously_accept_invalid_certs = true: the server's certificate is NOT verified; anyone on the path can read and change this traffic"
            ));
            if url.starts_with("http://") {
                warnings.push(format!(
                    "{at}: dangerously_accept_invalid_certs has no effect on an http:// url"
                ));
            }
        }
        Ok(tls)
    }

    /// `proxy`: from the environment (the default), none, or a URL.
    fn proxy(&self, at: &str) -> anyhow::Result<ProxyMode> {
        Ok(match self.proxy.as_deref() {
            None | Some("env") => ProxyMode::Env,
            Some("none") => ProxyMode::Off,
            Some(u) => {
                check::url(&format!("{at}: proxy"), u)?;
                ProxyMode::Url(u.to_owned())
            }
        })
    }

    /// A stdio target: a command, and none of the HTTP keys.
    fn stdio_target(&self, at: &str) -> anyhow::Result<Target> {
        if self.command.is_empty() || self.command[0].is_empty() {
            bail!("{at}: transport \"stdio\" needs command = [\"program\", \"arg\", …]");
        }
        let http_only = self.ca_file.is_some()
            || self.client_cert.is_some()
            || self.client_key.is_some()
            || self.dangerously_accept_invalid_certs
            || self.proxy.is_some();
        if self.url.is_some()
            || !self.headers.is_empty()
            || !self.headers_env.is_empty()
            || self.oauth.is_some()
            || http_only
        {
            bail!(
                "{at}: url, headers, oauth, ca_file, client_cert, client_key, proxy and dangerously_accept_invalid_certs are for the HTTP transports"
            );
        }
        Ok(Target::Stdio {
            command: self.command.clone(),
            env: self.env.clone(),
            cwd: self.cwd.clone(),
            env_clear: false,
            contain: super::stdio::containment(at, self.sandbox.as_ref(), self.limits.as_ref())?,
            warm: self.warm.unwrap_or(0),
        })
    }
}

/// `protocol`: `"auto"` (the default), a session-era version, or a supported 2026 one.
fn protocol(at: &str, v: Option<&str>) -> anyhow::Result<Protocol> {
    Ok(match v {
        None | Some("auto") => Protocol::Auto,
        Some(v) if mcpgate_jsonrpc::mcp::is_session_version(v) => Protocol::Session,
        Some(v)
            if mcpgate_jsonrpc::mcp::is_modern_version(v)
                && mcpgate_jsonrpc::mcp::is_supported_version(v) =>
        {
            Protocol::Modern
        }
        Some(v) => bail!("{at}: protocol {v:?} is not \"auto\", \"2025-11-25\" or \"2026-07-28\""),
    })
}
