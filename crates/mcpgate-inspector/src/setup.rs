//! `mcpgate inspector`'s command line ([`Args`]) and its own TOML file (not the gateway's
//! config file) → a [`Setup`]: the [`InspectorConfig`], the listen address, the session
//! token, the session limits and the UI link to print. The command line wins over the
//! file; the file's keys, defaults and checks are in `setup/raw.rs`, the allowlist the
//! command line adds in `setup/allowlist.rs`.
//!
//! ```toml
//! listen = "127.0.0.1:6277"                    # loopback only
//! ui_origins = ["http://localhost:6274"]       # where the UI is served from
//! token_env = "MCPGATE_INSPECTOR_TOKEN"        # or token = "…"; else generated
//!
//! [[stdio]]                                    # a command callers may start
//! command = "npx"
//! args = ["-y", "@modelcontextprotocol/server-everything"]
//! allow_env = ["DEBUG"]
//!
//! [[url]]                                      # upstream URLs callers may open
//! prefix = "http://127.0.0.1:3001/"
//! ```

mod allowlist;
mod raw;
#[cfg(test)]
mod tests;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use mcpgate_session::SessionConfig;
use mcpgate_upstream::Timeouts;

use crate::config::{InspectorConfig, Protocol, ProxyAuth};
use crate::error::SetupError;
use crate::ssrf::FetchAllow;
use crate::token::random_token;
use crate::v2::find_ui;
use raw::RawInspector;

/// The environment variable a token may come from.
const TOKEN_ENV: &str = "MCPGATE_INSPECTOR_TOKEN";
/// The Inspector 1.x proxy's usual address.
const DEFAULT_LISTEN: &str = "127.0.0.1:6277";
/// Where the Inspector 2.x serves its UI and API.
const DEFAULT_LISTEN_V2: &str = "127.0.0.1:6274";
/// Where the Inspector UI is served by default (its `CLIENT_PORT`).
const DEFAULT_UI_ORIGINS: [&str; 2] = ["http://localhost:6274", "http://127.0.0.1:6274"];
/// Bytes of a generated session token (64 hex digits).
const TOKEN_BYTES: usize = 32;

/// Serve the MCP Inspector UI's proxy protocol: the UI picks a stdio command or a server URL
/// per connection, within an allowlist; every connection gets its own upstream session.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Inspector config file (TOML): listen, ui_origins, token/token_env, inherit_env,
    /// [[stdio]] and [[url]] allowlist entries, [defaults].
    #[arg(long, short = 'c', value_name = "FILE")]
    config: Option<PathBuf>,
    /// Listen address (loopback only). Default 127.0.0.1:6277.
    #[arg(long, value_name = "ADDR")]
    listen: Option<String>,
    /// An origin the Inspector UI is served from (repeatable). Default
    /// http://localhost:6274 and http://127.0.0.1:6274.
    #[arg(long = "ui-origin", value_name = "ORIGIN")]
    ui_origins: Vec<String>,
    /// The UI's URL for the printed ready link. Default: the first UI origin.
    #[arg(long, value_name = "URL")]
    ui_url: Option<String>,
    /// Allow upstream URLs under this prefix (repeatable), for Streamable HTTP and SSE.
    #[arg(long = "allow-url", value_name = "PREFIX")]
    allow_urls: Vec<String>,
    /// Turn the session token off. Anyone who can make a request with an allowed Origin
    /// can then start the allowed commands. Logged as a warning.
    #[arg(long)]
    dangerously_omit_auth: bool,
    /// The Inspector protocol: `v2` (Inspector 2.x: mcpgate serves the UI and its API) or
    /// `v1` (Inspector 1.x: the UI is served elsewhere and uses mcpgate as its proxy).
    #[arg(long, value_name = "v1|v2")]
    protocol: Option<String>,
    /// v2: the Inspector UI (`clients/web/dist` of npm @modelcontextprotocol/inspector
    /// 2.x, that package, or a directory holding it in node_modules). Default: found under
    /// the current directory's node_modules.
    #[arg(long, value_name = "DIR")]
    ui: Option<PathBuf>,
    /// v2: an address or CIDR the UI's /api/fetch relay may reach although it is not
    /// public (repeatable; loopback, private, link-local and metadata addresses are
    /// refused otherwise).
    #[arg(long = "fetch-allow", value_name = "CIDR")]
    fetch_allow: Vec<String>,
    /// Check the configuration and exit (0 when valid, 64 otherwise).
    #[arg(long)]
    check: bool,
    /// Allow exactly this stdio command and these arguments (after `--`), and make it the
    /// UI's default.
    #[arg(last = true, value_name = "CMD")]
    command: Vec<String>,
}

impl Args {
    /// Whether `--check` was given: validate the configuration and exit.
    pub fn check_only(&self) -> bool {
        self.check
    }
}

/// Everything the binary needs to serve the inspector.
#[derive(Debug)]
pub struct Setup {
    /// Where to listen (a loopback address; port 0 picks one).
    pub listen: SocketAddr,
    /// Whether the UI origins were configured (v2 derives them from the bound address).
    origins_given: bool,
    /// The UI's URL, for the printed link.
    pub ui_url: String,
    /// Whether the token was generated here (rather than configured).
    pub generated: bool,
    /// The inspector's own configuration.
    pub inspector: InspectorConfig,
    /// The session table's limits.
    pub session: SessionConfig,
    /// The upstream timeouts.
    pub timeouts: Timeouts,
    /// The SSE keep-alive interval.
    pub keep_alive: Duration,
}

impl Setup {
    /// The setup `args` and the config file they name (if any) describe, checked.
    pub fn from_args(args: &Args) -> Result<Setup, SetupError> {
        let raw = RawInspector::load(args.config.as_deref())?;
        let v2 = is_v2(args.protocol.as_deref().or(raw.protocol.as_deref()))?;
        let listen = listen(args.listen.as_ref().or(raw.listen.as_ref()), v2)?;
        let (ui_origins, origins_given) = ui_origins(args, &raw, v2, listen);
        let ui_url = args
            .ui_url
            .clone()
            .or(raw.ui_url.clone())
            .unwrap_or_else(|| ui_link_of(&ui_origins[0], v2));
        let protocol = protocol(args, &raw, v2)?;
        let (auth, generated) = auth(args.dangerously_omit_auth, &raw)?;
        let mut stdio = raw.stdio_rules()?;
        let mut defaults = raw.defaults();
        if let Some((cmd, cmd_args)) = args.command.split_first() {
            stdio.insert(0, allowlist::command_rule(cmd, cmd_args));
            defaults.get_or_insert_with(|| allowlist::command_defaults(cmd, cmd_args));
        }
        let mut urls = raw.url_rules()?;
        urls.extend(allowlist::cli_url_rules(&args.allow_urls));
        let defaults = defaults.unwrap_or_else(|| allowlist::implied_defaults(&stdio, &urls));
        let base_env = raw.base_env()?;
        let (session, timeouts, keep_alive) = raw.limits()?;
        let inspector = InspectorConfig {
            auth,
            ui_origins,
            stdio,
            urls,
            base_env,
            defaults,
            protocol,
        };
        inspector.validate()?;
        Ok(Setup {
            listen,
            origins_given,
            ui_url,
            generated,
            inspector,
            session,
            timeouts,
            keep_alive,
        })
    }

    /// Takes the address the listener was bound to: a v2 backend whose origins were not
    /// configured serves the UI from there (port 0 became a port only now).
    pub fn bound(&mut self, addr: SocketAddr) {
        if matches!(self.inspector.protocol, Protocol::V2 { .. }) && !self.origins_given {
            self.inspector.ui_origins = own_origins(addr);
            self.ui_url = ui_link_of(&self.inspector.ui_origins[0], true);
        }
    }

    /// The session token (`None`: authentication is off).
    pub fn token(&self) -> Option<&str> {
        match &self.inspector.auth {
            ProxyAuth::Token(t) => Some(t),
            ProxyAuth::DangerouslyDisabled => None,
        }
    }

    /// The link to print for the UI of a backend at `proxy`: v2's UI, served here, carries
    /// the token itself; v1's gets this proxy's address and the token in its query.
    pub fn ui_link(&self, proxy: &str) -> String {
        match self.inspector.protocol {
            Protocol::V2 { .. } => self.ui_url.clone(),
            Protocol::V1 => ready_url(&self.ui_url, proxy, self.token()),
        }
    }
}

/// Whether the protocol asked for is v2 (the default) rather than v1.
fn is_v2(protocol: Option<&str>) -> Result<bool, SetupError> {
    match protocol {
        None | Some("v2") => Ok(true),
        Some("v1") => Ok(false),
        Some(p) => Err(SetupError::Protocol {
            given: p.to_owned(),
        }),
    }
}

/// The listen address: given, or the protocol's usual one; loopback only.
fn listen(given: Option<&String>, v2: bool) -> Result<SocketAddr, SetupError> {
    let given = given.map_or(
        if v2 {
            DEFAULT_LISTEN_V2
        } else {
            DEFAULT_LISTEN
        },
        |s| s,
    );
    let listen: SocketAddr = given.parse().map_err(|source| SetupError::ListenAddr {
        given: given.to_owned(),
        source,
    })?;
    if !listen.ip().is_loopback() {
        return Err(SetupError::NotLoopback { listen });
    }
    Ok(listen)
}

/// The UI origins (trimmed, without a trailing `/`), and whether they were configured: the
/// command line's, else the file's, else v2's own address or the 1.x UI's usual ones.
fn ui_origins(
    args: &Args,
    raw: &RawInspector,
    v2: bool,
    listen: SocketAddr,
) -> (Vec<String>, bool) {
    let mut origins = args.ui_origins.clone();
    if origins.is_empty() {
        origins = raw.ui_origins.clone();
    }
    let given = !origins.is_empty();
    if origins.is_empty() {
        origins = if v2 {
            own_origins(listen)
        } else {
            DEFAULT_UI_ORIGINS.iter().map(|s| (*s).to_owned()).collect()
        };
    }
    let origins = origins
        .iter()
        .map(|o| o.trim().trim_end_matches('/').to_owned())
        .collect();
    (origins, given)
}

/// The UI's URL when only its origin is known (v2 serves it at `/`).
fn ui_link_of(origin: &str, v2: bool) -> String {
    if v2 {
        format!("{origin}/")
    } else {
        origin.to_owned()
    }
}

/// The protocol with what it needs: v2's UI directory (found) and the fetch relay's
/// allowed ranges (the command line's, then the file's).
fn protocol(args: &Args, raw: &RawInspector, v2: bool) -> Result<Protocol, SetupError> {
    if !v2 {
        return Ok(Protocol::V1);
    }
    let given = args.ui.clone().or(raw.ui.clone());
    let here = std::env::current_dir().unwrap_or_default();
    let dir = given.unwrap_or(here);
    let ui = find_ui(&dir).ok_or(SetupError::UiNotFound { dir })?;
    let mut allow = args.fetch_allow.clone();
    allow.extend(raw.fetch_allow.iter().cloned());
    Ok(Protocol::V2 {
        ui,
        fetch_allow: FetchAllow::parse(&allow)?,
    })
}

/// The token check, and whether its token was generated here: off only when asked to be;
/// else `token`, the variable `token_env` names, `MCPGATE_INSPECTOR_TOKEN`, or generated.
fn auth(omit: bool, raw: &RawInspector) -> Result<(ProxyAuth, bool), SetupError> {
    if omit {
        return Ok((ProxyAuth::DangerouslyDisabled, false));
    }
    let configured = match (&raw.token, &raw.token_env) {
        (Some(_), Some(_)) => return Err(SetupError::TokenTwice),
        (Some(t), None) => Some(t.clone()),
        (None, Some(var)) => Some(std::env::var(var).map_err(|source| SetupError::TokenEnv {
            var: var.clone(),
            source,
        })?),
        (None, None) => std::env::var(TOKEN_ENV).ok().filter(|t| !t.is_empty()),
    };
    Ok(match configured {
        Some(t) => (ProxyAuth::Token(t), false),
        None => (ProxyAuth::Token(random_token(TOKEN_BYTES)?), true),
    })
}

/// The origins of a v2 backend on `listen`: the UI is served from there.
fn own_origins(listen: SocketAddr) -> Vec<String> {
    let port = listen.port();
    let ip = match listen.ip() {
        std::net::IpAddr::V6(ip) => format!("[{ip}]"),
        ip => ip.to_string(),
    };
    vec![
        format!("http://{ip}:{port}"),
        format!("http://localhost:{port}"),
    ]
}

/// Percent-encodes a query value.
fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 3);
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The UI's URL with this proxy's address (and the token) prefilled.
fn ready_url(ui_url: &str, proxy: &str, token: Option<&str>) -> String {
    let base = ui_url.trim_end_matches('/');
    let mut q = format!("MCP_PROXY_FULL_ADDRESS={}", encode(proxy));
    if let Some(t) = token {
        q.push_str(&format!("&MCP_PROXY_AUTH_TOKEN={}", encode(t)));
    }
    format!("{base}/?{q}")
}
