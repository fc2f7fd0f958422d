//! `mcpgate-testkit`: run the test MCP server over stdio or Streamable HTTP.

use std::io::Write;
use std::net::SocketAddr;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use mcpgate_testkit::{HttpOptions, HttpServer, StdioOptions};

/// A test MCP server for mcpgate.
#[derive(Debug, Parser)]
#[command(name = "mcpgate-testkit", version, about)]
struct Cli {
    #[command(subcommand)]
    mode: Mode,
}

#[derive(Debug, Subcommand)]
enum Mode {
    /// Serve newline-delimited JSON-RPC on stdin/stdout until stdin closes.
    Stdio {
        /// Send a timer notification this many ms after `initialize`.
        #[arg(long)]
        timer_ms: Option<u64>,
    },
    /// Serve MCP Streamable HTTP until SIGTERM/SIGINT.
    Http {
        /// Address to bind; port 0 picks a free one.
        #[arg(long, default_value = "127.0.0.1:0")]
        listen: SocketAddr,
        /// Send a timer notification on the session's GET stream this many ms after `initialize`.
        #[arg(long)]
        timer_ms: Option<u64>,
        /// Reset the TCP connection instead of answering DELETE.
        #[arg(long)]
        reset_on_delete: bool,
        /// Refuse the standalone GET stream with 405.
        #[arg(long)]
        no_get: bool,
        /// Answer every request as an SSE stream.
        #[arg(long)]
        always_sse: bool,
        /// Abort the connection of each session's first streamed tools/call
        /// once it has sent N events (the call goes on; resume with GET + Last-Event-ID).
        #[arg(long, value_name = "N")]
        cut_after: Option<usize>,
        /// Start every new SSE stream with a priming event (an id, empty data).
        #[arg(long)]
        priming: bool,
        /// Serve HTTPS with this certificate chain (PEM; needs --tls-key).
        #[arg(long, value_name = "FILE", requires = "tls_key")]
        tls_cert: Option<std::path::PathBuf>,
        /// The certificate's private key (PEM).
        #[arg(long, value_name = "FILE", requires = "tls_cert")]
        tls_key: Option<std::path::PathBuf>,
        /// Require client certificates issued by this CA (PEM).
        #[arg(long, value_name = "FILE", requires = "tls_cert")]
        client_ca: Option<std::path::PathBuf>,
        /// Close keep-alive connections idle this many ms (Node servers: 5000).
        #[arg(long, value_name = "MS")]
        idle_close_ms: Option<u64>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("mcpgate-testkit: cannot start runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli.mode)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mcpgate-testkit: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(mode: Mode) -> std::io::Result<()> {
    match mode {
        Mode::Stdio { timer_ms } => mcpgate_testkit::run_stdio(StdioOptions { timer_ms }).await,
        Mode::Http {
            listen,
            timer_ms,
            reset_on_delete,
            no_get,
            always_sse,
            cut_after,
            priming,
            tls_cert,
            tls_key,
            client_ca,
            idle_close_ms,
        } => {
            let tls = match (&tls_cert, &tls_key) {
                (Some(c), Some(k)) => {
                    Some(mcpgate_testkit::tls_config(c, k, client_ca.as_deref())?)
                }
                _ => None,
            };
            let opts = HttpOptions {
                tls,
                timer_ms,
                reset_on_delete,
                no_get,
                always_sse,
                cut_after,
                priming,
                idle_close: idle_close_ms.map(std::time::Duration::from_millis),
                ..HttpOptions::default()
            };
            let server = HttpServer::start(listen, opts).await?;
            let mut stdout = std::io::stdout();
            writeln!(stdout, "LISTENING {}", server.url())?;
            stdout.flush()?;
            wait_for_signal().await?;
            server.shutdown().await;
            Ok(())
        }
    }
}

async fn wait_for_signal() -> std::io::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    Ok(())
}
