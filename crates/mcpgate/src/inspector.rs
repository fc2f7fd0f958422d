//! `mcpgate inspector`: mcpgate as the backend ("proxy") of the MCP Inspector web UI. The
//! command line and its own TOML file (not the gateway's config file), the session token,
//! the printed ready URL, and the wiring of a [`mcpgate_server::Front`] in inspector mode.
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

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use mcpgate_inspector::{
    FetchAllow, Inspector, InspectorConfig, InspectorDefaults, Protocol, ProxyAuth, StdioRule,
    UrlRule, find_ui, literal_pattern, quote_args,
};
use mcpgate_server::FrontConfig;
use mcpgate_session::SessionConfig;
use mcpgate_upstream::{Connector, Timeouts};
use raw::RawInspector;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

/// The environment variable a token may come from.
const TOKEN_ENV: &str = "MCPGATE_INSPECTOR_TOKEN";
/// The Inspector 1.x proxy's usual address.
const DEFAULT_LISTEN: &str = "127.0.0.1:6277";
/// Where the Inspector 2.x serves its UI and API.
const DEFAULT_LISTEN_V2: &str = "127.0.0.1:6274";
/// Where the Inspector UI is served by default (its `CLIENT_PORT`).
const DEFAULT_UI_ORIGINS: [&str; 2] = ["http://localhost:6274", "http://127.0.0.1:6274"];

/// Serve the MCP Inspector UI's proxy protocol: the UI picks a stdio command or a server URL
/// per connection, within an allowlist; every connection gets its own upstream session.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
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

/// Everything `run` needs.
#[derive(Debug)]
struct Setup {
    listen: SocketAddr,
    /// Whether the UI origins were configured (v2 derives them from the bound address).
    origins_given: bool,
    ui_url: String,
    /// Whether the token was generated here (rather than configured).
    generated: bool,
    inspector: InspectorConfig,
    session: SessionConfig,
    timeouts: Timeouts,
    keep_alive: Duration,
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

/// A short name for logs from a command: its file name, letters, digits, `-`, `_` only.
fn name_of(command: &str) -> String {
    let base = Path::new(command)
        .file_name()
        .map_or_else(|| command.to_owned(), |n| n.to_string_lossy().into_owned());
    let s: String = base
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() { "stdio".into() } else { s }
}

/// 256 random bits as 64 hex digits.
fn random_token() -> anyhow::Result<String> {
    let mut b = [0u8; 32];
    getrandom::fill(&mut b)
        .map_err(|e| anyhow::anyhow!("the OS random number generator failed: {e}"))?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

fn build(args: &Args) -> anyhow::Result<Setup> {
    let raw: RawInspector = match &args.config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            toml::from_str(&text).with_context(|| format!("invalid config {}", path.display()))?
        }
        None => RawInspector::default(),
    };
    let v2 = match args.protocol.as_deref().or(raw.protocol.as_deref()) {
        None | Some("v2") => true,
        Some("v1") => false,
        Some(p) => bail!("protocol: {p:?} is not v1 or v2"),
    };
    let listen_s = args
        .listen
        .clone()
        .or(raw.listen.clone())
        .unwrap_or_else(|| {
            if v2 {
                DEFAULT_LISTEN_V2
            } else {
                DEFAULT_LISTEN
            }
            .into()
        });
    let listen: SocketAddr = listen_s
        .parse()
        .with_context(|| format!("listen: {listen_s:?} is not an IP:port address"))?;
    if !listen.ip().is_loopback() {
        bail!(
            "listen: {listen} is not a loopback address; the inspector proxy starts processes for its callers and only listens on loopback (127.0.0.1, [::1])"
        );
    }
    let mut ui_origins = args.ui_origins.clone();
    if ui_origins.is_empty() {
        ui_origins = raw.ui_origins.clone();
    }
    let origins_given = !ui_origins.is_empty();
    if ui_origins.is_empty() {
        ui_origins = if v2 {
            own_origins(listen)
        } else {
            DEFAULT_UI_ORIGINS.iter().map(|s| (*s).to_owned()).collect()
        };
    }
    let ui_origins: Vec<String> = ui_origins
        .iter()
        .map(|o| o.trim().trim_end_matches('/').to_owned())
        .collect();
    let ui_url = args
        .ui_url
        .clone()
        .or(raw.ui_url.clone())
        .unwrap_or_else(|| {
            if v2 {
                format!("{}/", ui_origins[0])
            } else {
                ui_origins[0].clone()
            }
        });
    let protocol = if v2 {
        let given = args.ui.clone().or(raw.ui.clone());
        let here = std::env::current_dir().unwrap_or_default();
        let ui = find_ui(given.as_deref().unwrap_or(&here)).with_context(|| {
            format!(
                "the Inspector 2.x UI was not found in {}: pass --ui DIR (the clients/web/dist \
                 of npm @modelcontextprotocol/inspector 2.x, or a directory where it is \
                 installed: npm install @modelcontextprotocol/inspector), or --protocol v1",
                given.as_deref().unwrap_or(&here).display()
            )
        })?;
        let mut allow = args.fetch_allow.clone();
        allow.extend(raw.fetch_allow.iter().cloned());
        Protocol::V2 {
            ui,
            fetch_allow: FetchAllow::parse(&allow).map_err(|e| anyhow::anyhow!(e))?,
        }
    } else {
        Protocol::V1
    };

    let (auth, generated) = if args.dangerously_omit_auth {
        (ProxyAuth::DangerouslyDisabled, false)
    } else {
        let configured = match (&raw.token, &raw.token_env) {
            (Some(_), Some(_)) => bail!("give at most one of token and token_env"),
            (Some(t), None) => Some(t.clone()),
            (None, Some(var)) => {
                Some(std::env::var(var).with_context(|| format!("token_env: {var} is not set"))?)
            }
            (None, None) => std::env::var(TOKEN_ENV).ok().filter(|t| !t.is_empty()),
        };
        match configured {
            Some(t) => (ProxyAuth::Token(t), false),
            None => (ProxyAuth::Token(random_token()?), true),
        }
    };

    let mut stdio = Vec::new();
    for (i, s) in raw.stdio.iter().enumerate() {
        stdio.push(StdioRule {
            name: s.name.clone().unwrap_or_else(|| name_of(&s.command)),
            command: s.command.clone(),
            args: s.args.clone(),
            env: s.env.clone(),
            allow_env: s.allow_env.clone(),
            cwd: s.cwd.clone(),
        });
        if s.name.as_ref().is_some_and(|n| n.is_empty()) {
            bail!("stdio[{i}]: name must not be empty");
        }
    }
    let mut defaults = raw.defaults.as_ref().map(|d| InspectorDefaults {
        transport: d.transport.clone(),
        command: d.command.clone(),
        args: Some(quote_args(&d.args)).filter(|a| !a.is_empty()),
        server_url: d.server_url.clone(),
    });
    if let Some((cmd, cmd_args)) = args.command.split_first() {
        stdio.insert(
            0,
            StdioRule {
                name: name_of(cmd),
                command: cmd.clone(),
                args: cmd_args.iter().map(|a| literal_pattern(a)).collect(),
                env: BTreeMap::new(),
                allow_env: Vec::new(),
                cwd: None,
            },
        );
        defaults.get_or_insert(InspectorDefaults {
            transport: Some("stdio".into()),
            command: Some(cmd.clone()),
            args: Some(quote_args(cmd_args)),
            server_url: None,
        });
    }

    let mut urls = Vec::new();
    for (i, u) in raw.url.iter().enumerate() {
        let transports = u
            .transports
            .clone()
            .unwrap_or_else(|| vec!["streamable-http".into(), "sse".into()]);
        for t in &transports {
            if t != "streamable-http" && t != "sse" {
                bail!("url[{i}]: transport {t:?} is not \"streamable-http\" or \"sse\"");
            }
        }
        let mut headers: Vec<(String, String)> = u
            .headers
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for (name, var) in &u.headers_env {
            let value = std::env::var(var)
                .with_context(|| format!("url[{i}]: headers_env.{name}: {var} is not set"))?;
            headers.push((name.clone(), value));
        }
        urls.push(UrlRule {
            name: u.name.clone().unwrap_or_else(|| format!("url{i}")),
            prefix: u.prefix.clone(),
            streamable_http: transports.iter().any(|t| t == "streamable-http"),
            sse: transports.iter().any(|t| t == "sse"),
            headers,
            forward_headers: u.forward_headers,
        });
    }
    for (i, p) in args.allow_urls.iter().enumerate() {
        urls.push(UrlRule {
            name: format!("cli{i}"),
            prefix: p.clone(),
            streamable_http: true,
            sse: true,
            headers: Vec::new(),
            forward_headers: true,
        });
    }
    // Without explicit defaults: the first stdio entry whose arguments are all literal,
    // else the first URL.
    let defaults = defaults.unwrap_or_else(|| {
        let literal = stdio
            .iter()
            .find(|r| r.args.iter().all(|a| !a.contains(['*', '?', '\\'])));
        match (literal, urls.first()) {
            (Some(r), _) => InspectorDefaults {
                transport: Some("stdio".into()),
                command: Some(r.command.clone()),
                args: Some(quote_args(&r.args)),
                server_url: None,
            },
            (None, Some(u)) => InspectorDefaults {
                transport: Some(
                    if u.streamable_http {
                        "streamable-http"
                    } else {
                        "sse"
                    }
                    .into(),
                ),
                command: None,
                args: None,
                server_url: Some(u.prefix.clone()),
            },
            (None, None) => InspectorDefaults::default(),
        }
    });

    let base_env: BTreeMap<String, String> = raw
        .inherit_env
        .iter()
        .filter_map(|k| std::env::var(k).ok().map(|v| (k.clone(), v)))
        .collect();
    for k in &raw.inherit_env {
        if k.is_empty() || !k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            bail!("inherit_env: {k:?} is not a valid variable name");
        }
    }
    if raw.max_sessions == 0 || raw.idle_timeout.is_zero() || raw.request_timeout.is_zero() {
        bail!("max_sessions, idle_timeout and request_timeout must be above zero");
    }
    if raw.keep_alive.is_zero() {
        bail!("keep_alive must be above zero");
    }
    let inspector = InspectorConfig {
        auth,
        ui_origins,
        stdio,
        urls,
        base_env,
        defaults,
        protocol,
    };
    inspector.validate().map_err(|e| anyhow::anyhow!(e))?;
    Ok(Setup {
        listen,
        origins_given,
        ui_url,
        generated,
        inspector,
        session: SessionConfig {
            idle_timeout: raw.idle_timeout,
            max_sessions: raw.max_sessions,
            request_timeout: raw.request_timeout,
            ..SessionConfig::default()
        },
        timeouts: Timeouts {
            request: raw.request_timeout,
            exit_grace: raw.exit_grace,
            ..Timeouts::default()
        },
        keep_alive: raw.keep_alive,
    })
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

/// `mcpgate inspector …`.
pub(crate) fn main(args: &Args, runtime: &tokio::runtime::Runtime) -> ExitCode {
    let setup = match build(args) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("mcpgate inspector: {e:#}");
            return ExitCode::from(crate::config::EXIT_CONFIG);
        }
    };
    if args.check {
        println!(
            "mcpgate inspector: ok ({} stdio command(s), {} URL prefix(es), listening on {})",
            setup.inspector.stdio.len(),
            setup.inspector.urls.len(),
            setup.listen
        );
        return ExitCode::SUCCESS;
    }
    match runtime.block_on(run(setup)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mcpgate inspector: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(mut setup: Setup) -> anyhow::Result<()> {
    let connector = Connector::new(setup.timeouts.clone(), 4 * 1024 * 1024);
    let table = mcpgate_session::SessionTable::new(connector, setup.session.clone(), "", &[]);
    table.spawn_reaper();
    let listener = tokio::net::TcpListener::bind(setup.listen)
        .await
        .with_context(|| format!("cannot listen on {}", setup.listen))?;
    let addr = listener.local_addr().context("listener address")?;
    let proxy = format!("http://{addr}");
    let v2 = matches!(setup.inspector.protocol, Protocol::V2 { .. });
    if v2 && !setup.origins_given {
        // Port 0 was bound to a port only now.
        setup.inspector.ui_origins = own_origins(addr);
        setup.ui_url = format!("{}/", setup.inspector.ui_origins[0]);
    }
    let token = match &setup.inspector.auth {
        ProxyAuth::Token(t) => Some(t.clone()),
        ProxyAuth::DangerouslyDisabled => None,
    };
    // The first line on stdout: scripts and tests read the bound address from it.
    println!("mcpgate inspector listening on {proxy}");
    match &token {
        Some(t) => println!("mcpgate inspector session token: {t}"),
        None => println!(
            "mcpgate inspector: WARNING: authentication is DISABLED (--dangerously-omit-auth): any page served from an allowed UI origin can start the allowed commands"
        ),
    }
    if v2 {
        // The UI served here carries the token itself.
        println!("mcpgate inspector UI: {}", setup.ui_url);
    } else {
        println!(
            "mcpgate inspector UI: {}",
            ready_url(&setup.ui_url, &proxy, token.as_deref())
        );
    }
    if setup.inspector.stdio.is_empty() && setup.inspector.urls.is_empty() {
        warn!(
            "the allowlist is empty: every target will be refused (pass -- CMD [ARGS…], --allow-url PREFIX, or [[stdio]] / [[url]] entries in --config)"
        );
    }
    if token.is_none() {
        warn!(
            "AUTHENTICATION IS DISABLED (--dangerously-omit-auth): requests need only an allowed Origin; never run this where untrusted pages or local users can reach {addr}"
        );
    }
    info!(
        %addr,
        ui_origins = ?setup.inspector.ui_origins,
        stdio = setup.inspector.stdio.len(),
        urls = setup.inspector.urls.len(),
        token = if token.is_none() { "disabled" } else if setup.generated { "generated" } else { "configured" },
        "mcpgate inspector listening"
    );
    let front = mcpgate_server::Front::with_fallback(
        table,
        FrontConfig {
            keep_alive: setup.keep_alive,
            ..FrontConfig::default()
        },
        Box::new(Inspector::new(setup.inspector).context("inspector")?),
    )
    .context("front")?;
    let shutdown = CancellationToken::new();
    let serving = tokio::spawn(mcpgate_server::serve(listener, front, shutdown.clone()));
    crate::signals::wait_for_signal().await;
    info!("signal received: draining");
    shutdown.cancel();
    serving.await.context("server task failed")?;
    Ok(())
}

mod raw;
#[cfg(test)]
mod tests;
