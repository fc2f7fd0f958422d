//! # mcpgate
//!
//! The binary: parses the command line and the config file, initialises tracing, wires
//! the library crates together, and turns SIGTERM/SIGINT into a graceful drain. Protocol
//! logic lives in the library crates (`mcpgate-jsonrpc`, `-upstream`, `-session`,
//! `-server`); the inspector's own configuration lives in `mcpgate-inspector`;
//! `demo-server` runs the testkit's MCP server on stdio.
//!
//! ## Layout
//! - `main.rs`: the command line, `--check-config`, and the gateway's start: session
//!   table, listener, admin listener, drain.
//! - `config/`: the gateway's config file, one module per section (`mod.rs` lists them).
//! - `reload.rs`: SIGHUP: the config file and TLS files again.
//! - `signals.rs`: SIGTERM/SIGINT.
//! - `inspector.rs`: `mcpgate inspector`: serves the inspector crate's `Setup`.

mod config;
mod inspector;
mod reaper;
mod reload;
mod signals;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use clap::{Parser, Subcommand, ValueEnum};
use mcpgate_upstream::{Connector, Target};
use tokio_util::sync::CancellationToken;
use tracing::info;

use crate::config::RawConfig;

/// A session-multiplexing gateway for the Model Context Protocol: every client session
/// gets its own dedicated upstream session, and upstream messages are routed strictly by
/// session.
#[derive(Debug, Parser)]
#[command(version, args_conflicts_with_subcommands = true)]
struct Cli {
    /// TOML configuration file (see config/ for examples).
    #[arg(long, short = 'c', value_name = "FILE")]
    config: Option<PathBuf>,
    /// Listen address, e.g. 127.0.0.1:8080 (overrides the config file).
    #[arg(long, value_name = "ADDR")]
    listen: Option<String>,
    /// An HTTP upstream, e.g. http://127.0.0.1:3001/mcp (Streamable HTTP); a URL whose
    /// path ends in /sse is taken as a legacy HTTP+SSE server.
    #[arg(long, value_name = "URL", conflicts_with_all = ["config", "command"])]
    upstream: Option<String>,
    /// Check a config file and exit (0 when valid).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["config", "upstream", "command"])]
    check_config: Option<PathBuf>,
    /// Log format (the level comes from RUST_LOG, default "info").
    #[arg(long, value_enum, default_value_t = LogFormat::Human)]
    log_format: LogFormat,
    /// For `-- CMD`: an environment variable for the child (repeatable). The child
    /// inherits mcpgate's environment plus these.
    #[arg(long = "env", value_name = "KEY=VALUE", requires = "command", value_parser = parse_env)]
    env: Vec<(String, String)>,
    /// For `-- CMD`: the child's working directory (default: mcpgate's).
    #[arg(long, value_name = "DIR", requires = "command")]
    cwd: Option<String>,
    /// A stdio upstream: the command and its arguments, after `--`. Each client session
    /// starts its own process, which inherits mcpgate's environment (plus `--env`).
    #[arg(last = true, value_name = "CMD")]
    command: Vec<String>,
    #[command(subcommand)]
    sub: Option<Sub>,
}

#[derive(Debug, Subcommand)]
enum Sub {
    /// Run a built-in MCP server on stdio (tools echo, add, notify; a resource; a prompt).
    DemoServer,
    /// Serve the MCP Inspector: its 2.x UI and API (default) or its 1.x proxy protocol;
    /// targets only from an allowlist; token, Origin and Host checks, loopback only.
    Inspector(Box<mcpgate_inspector::Args>),
    /// Internal: the helper that kills the stdio children's process groups when the
    /// gateway dies (started by the gateway itself; reads its stdin).
    #[command(hide = true)]
    Reaper,
}

/// Bytes of a generated admin token (32 hex digits).
const ADMIN_TOKEN_BYTES: usize = 16;

#[derive(Debug, Clone, Copy, ValueEnum)]
enum LogFormat {
    Human,
    Json,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if cli.check_config.is_some() || cli.sub.is_some() {
        init_tracing(cli.log_format, None);
    }
    if let Some(path) = &cli.check_config {
        return check_config(path);
    }
    if let Some(Sub::Reaper) = cli.sub {
        let killed = mcpgate_child::reaper::serve(std::io::stdin().lock());
        if killed > 0 {
            tracing::warn!(
                groups = killed,
                "the gateway went away: killed the process groups of its stdio children"
            );
        }
        return ExitCode::SUCCESS;
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("mcpgate: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match &cli.sub {
        Some(Sub::Inspector(args)) => inspector::main(args, &runtime),
        Some(Sub::DemoServer) => demo_server(&runtime),
        Some(Sub::Reaper) | None => gateway(&cli, runtime),
    }
}

/// `--check-config FILE`: the warnings and a summary on stdout (exit 0), or the error on
/// stderr (exit 64).
fn check_config(path: &std::path::Path) -> ExitCode {
    match RawConfig::load(path).and_then(RawConfig::validate) {
        Ok(c) => {
            for w in &c.warnings {
                println!("warning: {w}");
            }
            println!(
                "{}: ok ({} server(s), listening on {})",
                path.display(),
                c.servers.len(),
                c.listen
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{}: {e:#}", path.display());
            ExitCode::from(config::EXIT_CONFIG)
        }
    }
}

/// `mcpgate demo-server`: the testkit's MCP server on stdio.
fn demo_server(runtime: &tokio::runtime::Runtime) -> ExitCode {
    match runtime.block_on(mcpgate_testkit::run_demo_stdio()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mcpgate demo-server: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The gateway: its configuration (a bad one exits 64), telemetry and tracing, then
/// [`run`] until a signal has drained it.
fn gateway(cli: &Cli, runtime: tokio::runtime::Runtime) -> ExitCode {
    let config = match build_config(cli) {
        Ok(c) => c,
        Err(e) => {
            init_tracing(cli.log_format, None);
            eprintln!("mcpgate: {e:#}");
            return ExitCode::from(config::EXIT_CONFIG);
        }
    };
    // Started outside the runtime (its exporter's HTTP client is a blocking one), and
    // shut down outside it, after the drain, so the last spans are exported.
    let telemetry = match config
        .telemetry
        .as_ref()
        .map(mcpgate_telemetry::Telemetry::start)
    {
        Some(Err(e)) => {
            init_tracing(cli.log_format, None);
            eprintln!("mcpgate: telemetry: {e}");
            return ExitCode::from(config::EXIT_CONFIG);
        }
        Some(Ok(t)) => Some(t),
        None => None,
    };
    init_tracing(cli.log_format, telemetry.as_ref());
    let source = (cli.config.clone(), cli.listen.clone());
    let outcome = runtime.block_on(run(config, source));
    drop(runtime);
    if let Some(t) = telemetry {
        t.shutdown();
    }
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mcpgate: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn build_config(cli: &Cli) -> anyhow::Result<config::Config> {
    let mut raw = if let Some(path) = &cli.config {
        RawConfig::load(path)?
    } else if let Some(url) = &cli.upstream {
        let headers = Vec::new();
        let url = url.clone();
        let legacy = url_path(&url).ends_with("/sse");
        let http = Default::default();
        RawConfig::single(
            if legacy {
                Target::LegacySse {
                    url,
                    headers,
                    http,
                    auth: None,
                }
            } else {
                Target::Http {
                    url,
                    headers,
                    http,
                    auth: None,
                }
            },
            config::CommandExtras::default(),
        )
    } else if !cli.command.is_empty() {
        RawConfig::single(
            Target::Stdio {
                command: cli.command.clone(),
                env: Default::default(),
                cwd: None,
                env_clear: false,
                contain: Default::default(),
                warm: 0,
            },
            config::CommandExtras {
                env: cli.env.iter().cloned().collect(),
                cwd: cli.cwd.clone(),
            },
        )
    } else {
        anyhow::bail!(
            "nothing to serve: pass --config FILE, --upstream URL, or -- CMD [ARGS…] (see --help)"
        );
    };
    if let Some(addr) = &cli.listen {
        raw.set_listen(addr.clone());
    }
    raw.validate()
}

/// Log lines to stderr (`RUST_LOG`), and with `telemetry` the request spans to OTLP (each
/// layer with its own filter: `RUST_LOG` does not decide what is traced).
fn init_tracing(format: LogFormat, telemetry: Option<&mcpgate_telemetry::Telemetry>) {
    use tracing_subscriber::Layer;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    let fmt = match format {
        LogFormat::Human => fmt.boxed(),
        LogFormat::Json => fmt.json().boxed(),
    };
    let _ = tracing_subscriber::registry()
        .with(fmt.with_filter(filter))
        .with(telemetry.map(mcpgate_telemetry::Telemetry::layer))
        .try_init();
}

/// Serves `config` until SIGTERM or SIGINT, then drains; `source` (the file and
/// `--listen`) is what a SIGHUP reloads.
async fn run(
    mut config: config::Config,
    source: (Option<std::path::PathBuf>, Option<String>),
) -> anyhow::Result<()> {
    let restart_only = reload::restart_only(&config);
    for w in &config.warnings {
        tracing::warn!("{w}");
    }
    raise_fd_limit();
    let table = session_table(&mut config)?;
    let tls = match config.tls.take() {
        Some(opts) => Some(mcpgate_tls::ServerTls::new(opts, "listen").context("listen TLS")?),
        None => None,
    };
    config.front.tls = tls.clone();
    let scheme = if tls.is_some() { "https" } else { "http" };
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("cannot listen on {}", config.listen))?;
    let addr = listener.local_addr().context("listener address")?;
    let grants = open_vault(&mut config, &format!("{scheme}://{addr}")).await?;
    let mounts: Vec<String> = config
        .servers
        .iter()
        .map(|s| format!("/servers/{}/mcp", s.name))
        .collect();
    let front = mcpgate_server::Front::new(
        table,
        config.servers,
        config.default_server.as_deref(),
        config.front,
    )
    .context("authentication")?;
    // The first line on stdout: scripts and tests read the bound address from it.
    println!("mcpgate listening on {scheme}://{addr}");
    info!(%addr, mounts = ?mounts, "mcpgate listening");
    let shutdown = CancellationToken::new();
    let mut reloadable = tls.into_iter().collect::<Vec<_>>();
    let admin = match config.admin {
        None => None,
        Some(a) => {
            let (task, tls) = start_admin(a, (config.redacted, grants), &front, &shutdown).await?;
            reloadable.extend(tls);
            Some(task)
        }
    };
    let reloader = reload::Reloader {
        path: source.0,
        listen: source.1,
        front: front.clone(),
        tls: reloadable,
        restart_only,
    };
    let serving = tokio::spawn(mcpgate_server::serve(listener, front, shutdown.clone()));
    tokio::spawn(reload::on_sighup(reloader, shutdown.clone()));
    signals::wait_for_signal().await;
    info!("signal received: draining");
    shutdown.cancel();
    serving.await.context("server task failed")?;
    if let Some(admin) = admin {
        let _ = admin.await;
    }
    Ok(())
}

/// Opens the token vault (a start that cannot is refused with the reason) and keeps the
/// users' consents in it; the callback is `{base}/oauth/callback` unless configured.
async fn open_vault(
    config: &mut config::Config,
    base: &str,
) -> anyhow::Result<Option<Arc<mcpgate_oauth::Grants>>> {
    let Some((vault, grants)) = config.vault.take() else {
        return Ok(None);
    };
    let store = mcpgate_store::Store::open(&vault.location, vault.keys)
        .await
        .context("cannot open the token vault")?;
    info!(vault = store.location(), "token vault open");
    grants.attach(store);
    if config::callback_is_default() {
        grants.set_redirect_uri(format!("{base}/oauth/callback"));
    }
    config.front.oauth = Some(grants.clone());
    Ok(Some(grants))
}

/// The session table of `config`'s servers, with what each needs built now (so a bad
/// certificate file or proxy is reported before the first session), its seal keys, its
/// groups and its reaper.
fn session_table(config: &mut config::Config) -> anyhow::Result<mcpgate_session::SessionTable> {
    let swept = mcpgate_child::PrivateTmp::sweep(&std::env::temp_dir());
    if swept > 0 {
        info!(
            dirs = swept,
            "removed sandboxed sessions' private /tmp directories left by a gateway that is gone"
        );
    }
    let mut connector = Connector::new(config.timeouts.clone(), config.max_line)
        .with_max_stdio_children(config.max_stdio_children);
    if let Some(r) = reaper::child_reaper() {
        connector = connector.with_reaper(r);
    }
    if let Some(c) = &config.cgroups {
        let swept = c.sweep();
        if swept > 0 {
            info!(cgroups = swept, root = %c.root().display(), "killed and removed stdio children's cgroups left by a gateway that is gone");
        }
        connector = connector.with_cgroups(c.clone());
    }
    let table = mcpgate_session::SessionTable::new(
        connector,
        config.session.clone(),
        &config.id_prefix,
        &config.servers,
    );
    for s in &config.servers {
        table
            .add_server(s)
            .with_context(|| format!("server {:?}", s.name))?;
    }
    table.set_seal_keys(config.seal_keys.take(), config.sealed_stateless_lifetime);
    table.set_groups(std::mem::take(&mut config.groups));
    table.spawn_reaper();
    Ok(table)
}

/// The admin listener: bound, announced on stdout (with the token when it was generated
/// here), serving the admin API and dashboard until `shutdown`; and its TLS, which SIGHUP
/// reloads.
async fn start_admin(
    admin: config::AdminListener,
    (redacted, grants): (serde_json::Value, Option<Arc<mcpgate_oauth::Grants>>),
    front: &mcpgate_server::Front,
    shutdown: &CancellationToken,
) -> anyhow::Result<(
    tokio::task::JoinHandle<()>,
    Option<std::sync::Arc<mcpgate_tls::ServerTls>>,
)> {
    let tls = match admin.tls {
        Some(o) => Some(mcpgate_tls::ServerTls::new(o, "admin").context("admin TLS")?),
        None => None,
    };
    let scheme = if tls.is_some() { "https" } else { "http" };
    let listener = tokio::net::TcpListener::bind(admin.addr)
        .await
        .with_context(|| format!("cannot listen on {} (admin)", admin.addr))?;
    let addr = listener.local_addr().context("admin listener address")?;
    let token = match admin.token {
        Some(t) => {
            println!("mcpgate admin listening on {scheme}://{addr}");
            t
        }
        None => {
            let t = mcpgate_inspector::random_token(ADMIN_TOKEN_BYTES).context("admin token")?;
            println!("mcpgate admin listening on {scheme}://{addr} token={t}");
            t
        }
    };
    info!(%addr, "admin API and dashboard listening");
    let cfg = mcpgate_admin::AdminConfig {
        token,
        redacted_config: redacted,
        tls: tls.clone(),
        grants,
    };
    let task = tokio::spawn(mcpgate_admin::serve(
        listener,
        front.table().clone(),
        cfg,
        shutdown.clone(),
    ));
    Ok((task, tls))
}

/// Raises the soft limit on open files to the hard limit: every client connection, HTTP
/// upstream connection and stdio pipe is a descriptor, and the common default soft limit
/// (1024) is far below what `listen.max_connections` allows.
fn raise_fd_limit() {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok((soft, hard)) if soft < hard => match setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
            Ok(()) => tracing::debug!(from = soft, to = hard, "raised the open-files limit"),
            Err(e) => tracing::warn!(soft, error = %e, "cannot raise the open-files limit"),
        },
        Ok(_) => {}
        Err(e) => tracing::warn!(error = %e, "cannot read the open-files limit"),
    }
}

/// A `KEY=VALUE` argument.
fn parse_env(s: &str) -> anyhow::Result<(String, String)> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
        _ => anyhow::bail!("{s:?} is not KEY=VALUE"),
    }
}

/// The path of a URL (without query), by plain string handling.
fn url_path(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let path = rest.find('/').map_or("", |i| &rest[i..]);
    path.split(['?', '#'])
        .next()
        .unwrap_or("")
        .trim_end_matches('/')
}
