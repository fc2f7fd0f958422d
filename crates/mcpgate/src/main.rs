//! # mcpgate
//!
//! The binary: parses the command line and the config file, initialises tracing, wires
//! the library crates together, and turns SIGTERM/SIGINT into a graceful drain. Protocol
//! logic lives in the library crates (`mcpgate-jsonrpc`, `-upstream`, `-session`,
//! `-server`); `demo-server` runs the testkit's MCP server on stdio.

mod config;
mod inspector;

use std::path::PathBuf;
use std::process::ExitCode;

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
    /// A stdio upstream: the command and its arguments, after `--`.
    #[arg(last = true, value_name = "CMD")]
    command: Vec<String>,
    #[command(subcommand)]
    sub: Option<Sub>,
}

#[derive(Debug, Subcommand)]
enum Sub {
    /// Run a built-in MCP server on stdio (tools echo, add, notify; a resource; a prompt).
    DemoServer,
    /// Serve the MCP Inspector UI's proxy protocol (the UI picks the target per session,
    /// within an allowlist; token, Origin check, loopback only).
    Inspector(inspector::Args),
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum LogFormat {
    Human,
    Json,
}

/// Exit code for a bad command line or configuration (EX_USAGE).
const EXIT_CONFIG: u8 = 64;

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing(cli.log_format);
    if let Some(path) = &cli.check_config {
        return match RawConfig::load(path).and_then(RawConfig::validate) {
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
                ExitCode::from(EXIT_CONFIG)
            }
        };
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
    if let Some(Sub::Inspector(args)) = &cli.sub {
        return inspector::main(args, &runtime);
    }
    if let Some(Sub::DemoServer) = cli.sub {
        return match runtime.block_on(mcpgate_testkit::run_demo_stdio()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("mcpgate demo-server: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let config = match build_config(&cli) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("mcpgate: {e:#}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    match runtime.block_on(run(config)) {
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
        RawConfig::single(
            None,
            if legacy {
                Target::LegacySse { url, headers }
            } else {
                Target::Http { url, headers }
            },
        )
    } else if !cli.command.is_empty() {
        RawConfig::single(
            None,
            Target::Stdio {
                command: cli.command.clone(),
                env: Default::default(),
                cwd: None,
                env_clear: false,
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

fn init_tracing(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    match format {
        LogFormat::Human => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

async fn run(config: config::Config) -> anyhow::Result<()> {
    for w in &config.warnings {
        tracing::warn!("{w}");
    }
    let connector = Connector::new(config.timeouts.clone(), config.max_line)
        .context("cannot build the HTTP client")?
        .with_max_stdio_children(config.max_stdio_children);
    let table =
        mcpgate_session::SessionTable::new(connector, config.session.clone(), &config.id_prefix);
    table.spawn_reaper();
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("cannot listen on {}", config.listen))?;
    let addr = listener.local_addr().context("listener address")?;
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
    );
    // The first line on stdout: scripts and tests read the bound address from it.
    println!("mcpgate listening on http://{addr}");
    info!(%addr, mounts = ?mounts, "mcpgate listening");
    let shutdown = CancellationToken::new();
    let admin = match config.admin {
        None => None,
        Some((admin_addr, token)) => {
            let admin_listener = tokio::net::TcpListener::bind(admin_addr)
                .await
                .with_context(|| format!("cannot listen on {admin_addr} (admin)"))?;
            let admin_addr = admin_listener
                .local_addr()
                .context("admin listener address")?;
            let generated = token.is_none();
            let token = token.unwrap_or_else(random_token);
            if generated {
                println!("mcpgate admin listening on http://{admin_addr} token={token}");
            } else {
                println!("mcpgate admin listening on http://{admin_addr}");
            }
            info!(addr = %admin_addr, "admin API and dashboard listening");
            let cfg = mcpgate_admin::AdminConfig {
                token,
                redacted_config: config.redacted,
            };
            Some(tokio::spawn(mcpgate_admin::serve(
                admin_listener,
                front.table().clone(),
                cfg,
                shutdown.clone(),
            )))
        }
    };
    let serving = tokio::spawn(mcpgate_server::serve(listener, front, shutdown.clone()));
    wait_for_signal().await;
    info!("signal received: draining");
    shutdown.cancel();
    serving.await.context("server task failed")?;
    if let Some(admin) = admin {
        let _ = admin.await;
    }
    Ok(())
}

async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
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

/// 128 random bits as 32 hex digits.
fn random_token() -> String {
    let mut b = [0u8; 16];
    if getrandom::fill(&mut b).is_err() {
        // No CSPRNG: refuse to run with a guessable admin token.
        eprintln!("mcpgate: the OS random number generator failed");
        std::process::exit(1);
    }
    b.iter().map(|x| format!("{x:02x}")).collect()
}
