//! `mcpgate inspector`: mcpgate as the backend ("proxy") of the MCP Inspector web UI. The
//! inspector crate turns the command line and its config file into a
//! [`Setup`](mcpgate_inspector::Setup); this module wires it: the session table, the
//! listener, the printed banner, a [`mcpgate_server::Front`] in inspector mode, the drain.

use std::process::ExitCode;

use anyhow::Context;
use mcpgate_inspector::{Args, Inspector, Setup};
use mcpgate_server::FrontConfig;
use mcpgate_upstream::Connector;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

/// Longest line a stdio child may write.
const MAX_LINE: usize = 4 * 1024 * 1024;

/// `mcpgate inspector …`.
pub(crate) fn main(args: &Args, runtime: &tokio::runtime::Runtime) -> ExitCode {
    let setup = match Setup::from_args(args) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("mcpgate inspector: {:#}", anyhow::Error::from(e));
            return ExitCode::from(crate::config::EXIT_CONFIG);
        }
    };
    if args.check_only() {
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
    let mut connector = Connector::new(setup.timeouts.clone(), MAX_LINE);
    if let Some(r) = crate::reaper::child_reaper() {
        connector = connector.with_reaper(r);
    }
    let table = mcpgate_session::SessionTable::new(connector, setup.session.clone(), "", &[]);
    table.spawn_reaper();
    let listener = tokio::net::TcpListener::bind(setup.listen)
        .await
        .with_context(|| format!("cannot listen on {}", setup.listen))?;
    let addr = listener.local_addr().context("listener address")?;
    setup.bound(addr);
    announce(&setup, addr);
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

/// The banner on stdout (its first line names the bound address: scripts and tests read
/// it), and the warnings an empty allowlist or disabled authentication deserve.
fn announce(setup: &Setup, addr: std::net::SocketAddr) {
    let proxy = format!("http://{addr}");
    let token = setup.token();
    println!("mcpgate inspector listening on {proxy}");
    match token {
        Some(t) => println!("mcpgate inspector session token: {t}"),
        None => println!(
            "mcpgate inspector: WARNING: authentication is DISABLED (--dangerously-omit-auth): any page served from an allowed UI origin can start the allowed commands"
        ),
    }
    println!("mcpgate inspector UI: {}", setup.ui_link(&proxy));
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
}
