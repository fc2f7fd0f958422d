//! Configuration, one module per section of the file. Each section's module holds its raw
//! serde struct (unknown keys rejected, every default documented beside its field), its
//! checks and its conversion to the library types, so a setting's name, default and
//! validation are in one place; [`RawConfig::validate`] composes them into the typed
//! [`Config`]. `--check-config` runs exactly this validation, certificate files included.
//! The defaults are those of the README's table and `config/example.toml`.
//!
//! - `listen.rs`: `[listen]` → the front's limits, `Host`/`Origin` policy, listener TLS,
//!   replica id; the warnings an exposed listener deserves.
//! - `session.rs`: `[session]` → the session table's limits, the bridge's, the seal keys.
//! - `upstream.rs`: `[upstream]` → the connector's timeouts and stdio limits.
//! - `servers.rs`: `[[server]]` → server specs (transports, URLs, upstream TLS, proxies).
//! - `oauth.rs`: a server's `[server.oauth]` → its credential source (upstream OAuth).
//! - `vault.rs`: `[vault]` (where users' upstream grants are kept) and `[oauth]` (the
//!   gateway's callback).
//! - `stdio.rs`: a stdio server's `[server.sandbox]` and `[server.limits]`.
//! - `virtuals.rs`: `[[virtual]]` → virtual servers (members, prefixes, filters, rules).
//! - `auth.rs`: `[auth]` → static tokens, JWT, the principals' groups.
//! - `admin.rs`: `[admin]` → the admin listener.
//! - `telemetry.rs`: `[telemetry]` → OTLP export.
//! - `tls.rs`: a listener's TLS files (`[listen]`, `[admin]`).
//! - `check.rs`: checks several sections share (names, URLs, secrets).

mod admin;
mod auth;
mod check;
mod listen;
mod oauth;
mod servers;
mod session;
mod stdio;
mod telemetry;
#[cfg(test)]
mod tests;
mod tls;
mod upstream;
mod vault;
mod virtuals;

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::Path;

use anyhow::{Context, bail};
use mcpgate_server::FrontConfig;
use mcpgate_session::{ServerSpec, SessionConfig};
use mcpgate_upstream::{Target, Timeouts};
use serde::{Deserialize, Serialize};

pub(crate) use admin::AdminListener;
pub(crate) use tls::ListenerTls;
pub(crate) use vault::callback_is_default;

/// Exit code for a bad command line or configuration (EX_USAGE).
pub(crate) const EXIT_CONFIG: u8 = 64;

/// The whole file as written: its sections.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawConfig {
    #[serde(default)]
    listen: listen::RawListen,
    #[serde(default, rename = "server")]
    servers: Vec<servers::RawServer>,
    /// Virtual servers: several servers behind one endpoint.
    #[serde(default, rename = "virtual")]
    virtuals: Vec<virtuals::RawVirtual>,
    #[serde(default)]
    session: session::RawSession,
    #[serde(default)]
    upstream: upstream::RawUpstream,
    /// The admin API and dashboard; off unless the section is present.
    admin: Option<admin::RawAdmin>,
    /// Client authentication; off unless the section is present.
    auth: Option<auth::RawAuth>,
    /// OpenTelemetry tracing; off unless the section is present.
    telemetry: Option<telemetry::RawTelemetry>,
    /// The token vault (users' upstream grants); off unless the section is present.
    vault: Option<vault::RawVault>,
    /// The gateway's upstream-OAuth callback.
    #[serde(default)]
    oauth: vault::RawOAuthSection,
}

/// The validated configuration.
#[derive(Debug)]
pub(crate) struct Config {
    pub(crate) listen: SocketAddr,
    pub(crate) front: FrontConfig,
    /// The listener's TLS files (`None`: plain HTTP), loaded at start.
    pub(crate) tls: Option<ListenerTls>,
    pub(crate) session: SessionConfig,
    pub(crate) timeouts: Timeouts,
    pub(crate) max_line: usize,
    pub(crate) max_stdio_children: usize,
    /// Where stdio children get cgroups of their own (`None`: they do not).
    pub(crate) cgroups: Option<std::sync::Arc<mcpgate_child::Cgroups>>,
    pub(crate) servers: Vec<ServerSpec>,
    pub(crate) default_server: Option<String>,
    /// Each static token principal's groups (virtual servers' access rules).
    pub(crate) groups: HashMap<String, Vec<String>>,
    pub(crate) id_prefix: String,
    /// Why the configuration is risky, if it is (printed as warnings at every start and by
    /// `--check-config`).
    pub(crate) warnings: Vec<String>,
    /// The admin listener.
    pub(crate) admin: Option<AdminListener>,
    /// The effective configuration as JSON, secrets redacted (for the admin API).
    pub(crate) redacted: serde_json::Value,
    /// The keys that seal session ids (`None`: ids are not sealed).
    pub(crate) seal_keys: Option<mcpgate_seal::KeyRing>,
    /// How long a stateless upstream's sealed id opens for.
    pub(crate) sealed_stateless_lifetime: std::time::Duration,
    /// OpenTelemetry export (`None`: off).
    pub(crate) telemetry: Option<mcpgate_telemetry::TelemetryConfig>,
    /// The token vault and the consents kept in it (`None`: no vault).
    pub(crate) vault: Option<(vault::Vault, std::sync::Arc<mcpgate_oauth::Grants>)>,
}

/// What a stdio server given on the command line (`-- CMD`) gets besides its command.
#[derive(Debug, Default)]
pub(crate) struct CommandExtras {
    pub(crate) env: BTreeMap<String, String>,
    pub(crate) cwd: Option<String>,
}

impl RawConfig {
    /// Reads and parses a TOML file.
    pub(crate) fn load(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        toml::from_str(&text).with_context(|| format!("invalid config {}", path.display()))
    }

    /// A config with one server given on the command line.
    pub(crate) fn single(target: Target, extras: CommandExtras) -> Self {
        let mut raw = RawConfig::default();
        raw.servers
            .push(servers::RawServer::single(target, extras.env, extras.cwd));
        raw
    }

    /// Overrides the listen address (from `--listen`).
    pub(crate) fn set_listen(&mut self, addr: String) {
        self.listen.addr = addr;
    }

    /// Checks every section (certificate files included) and builds the typed config.
    pub(crate) fn validate(self) -> anyhow::Result<Config> {
        let redacted = self.redacted();
        let mut warnings = Vec::new();
        let exchanges = self
            .servers
            .iter()
            .any(|s| s.oauth.as_ref().is_some_and(oauth::RawOAuth::exchanges));
        let listen = self.listen.validate(&mut warnings)?;
        let vault = match &self.vault {
            Some(v) => Some((
                v.validate(&self.session.seal_keys)?,
                self.oauth.grants(&listen.addr.to_string())?,
            )),
            None => None,
        };
        let admin = self
            .admin
            .map(|a| a.validate(listen.tls_reload_interval, &mut warnings))
            .transpose()?;
        let (servers, default_server) = catalogue(self.servers, self.virtuals, &mut warnings)?;
        let session = self.session.validate(self.upstream.protocol_cache)?;
        let upstream = self.upstream.validate(session.table.request_timeout)?;
        stdio::warm_fits(&servers, upstream.max_stdio_children)?;
        let cgroups = stdio::cgroups(&upstream.cgroup, &servers, &mut warnings)?;
        let telemetry = self.telemetry.map(|t| t.validate()).transpose()?;
        let groups = auth::groups(self.auth.as_ref());
        let mut auth = auth::validate(self.auth)?;
        if exchanges {
            if auth.jwt.is_none() {
                bail!(
                    "oauth grant \"token_exchange\" exchanges the clients' JWTs: configure [auth.jwt]"
                );
            }
            let subjects = oauth::subjects();
            auth.verified = Some(mcpgate_server::TokenSink(std::sync::Arc::new(
                move |who: &str, token: &str, exp: Option<u64>| subjects.verified(who, token, exp),
            )));
        }
        warnings.extend(listen.exposure(&auth));
        Ok(Config {
            listen: listen.addr,
            front: FrontConfig {
                auth,
                modern_inflight: session.modern_inflight,
                input_wait: session.input_wait,
                ..listen.front
            },
            tls: listen.tls,
            session: session.table,
            timeouts: upstream.timeouts,
            max_line: upstream.max_line,
            max_stdio_children: upstream.max_stdio_children,
            cgroups,
            servers,
            default_server,
            groups,
            id_prefix: listen.id_prefix,
            warnings,
            admin,
            redacted,
            seal_keys: session.seal_keys,
            sealed_stateless_lifetime: session.sealed_stateless_lifetime,
            telemetry,
            vault,
        })
    }

    /// The configuration as JSON with every secret (header values, environment values,
    /// tokens) replaced by `"<redacted>"`.
    fn redacted(&self) -> serde_json::Value {
        let mut v = serde_json::to_value(self).unwrap_or(serde_json::Value::Null);
        if let Some(servers) = v.get_mut("server").and_then(|s| s.as_array_mut()) {
            for s in servers {
                if let Some(o) = s.get_mut("oauth").and_then(|o| o.as_object_mut())
                    && let Some(secret) = o.get_mut("client_secret").filter(|x| !x.is_null())
                {
                    redact(secret);
                }
                for key in ["headers", "env"] {
                    if let Some(map) = s.get_mut(key).and_then(|m| m.as_object_mut()) {
                        map.values_mut().for_each(redact);
                    }
                }
            }
        }
        let secrets = [("/session/seal_keys", "secret"), ("/auth/tokens", "token")];
        for (list, key) in secrets {
            if let Some(items) = v.pointer_mut(list).and_then(|t| t.as_array_mut()) {
                items
                    .iter_mut()
                    .filter_map(|i| i.get_mut(key).filter(|x| !x.is_null()))
                    .for_each(redact);
            }
        }
        if let Some(t) = v.pointer_mut("/admin/token").filter(|t| !t.is_null()) {
            redact(t);
        }
        v
    }
}

/// Replaces a secret's value.
fn redact(v: &mut serde_json::Value) {
    *v = "<redacted>".into();
}

/// The servers and virtual servers (each name once), and the one marked default.
fn catalogue(
    raw_servers: Vec<servers::RawServer>,
    raw_virtuals: Vec<virtuals::RawVirtual>,
    warnings: &mut Vec<String>,
) -> anyhow::Result<(Vec<ServerSpec>, Option<String>)> {
    if raw_servers.is_empty() {
        bail!("no [[server]] configured: add one, or pass --upstream URL or -- CMD");
    }
    let mut servers: Vec<ServerSpec> = Vec::new();
    let mut default_server = None;
    let mut mark_default = |at: &str, spec: &ServerSpec| {
        if default_server.is_some() {
            bail!("{at}: more than one server is marked default");
        }
        default_server = Some(spec.name.clone());
        Ok(())
    };
    for (i, s) in raw_servers.into_iter().enumerate() {
        let at = format!("server[{i}] ({:?})", s.name);
        if servers.iter().any(|x| x.name == s.name) {
            bail!("{at}: duplicate server name");
        }
        let default = s.default;
        let spec = s.validate(&at, warnings)?;
        if default {
            mark_default(&at, &spec)?;
        }
        servers.push(spec);
    }
    for (i, v) in raw_virtuals.into_iter().enumerate() {
        let at = format!("virtual[{i}] ({:?})", v.name);
        let default = v.default;
        let spec = virtuals::virtual_server(&at, v, &servers)?;
        if default {
            mark_default(&at, &spec)?;
        }
        servers.push(spec);
    }
    Ok((servers, default_server))
}
