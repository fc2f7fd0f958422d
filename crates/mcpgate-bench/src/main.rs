//! `mcpgate-bench`: measures what mcpgate adds. It owns the whole benchmark
//! run — starting the upstream test servers (mcpgate-testkit, the official
//! everything server in Node) and the gateway as separate processes, driving
//! load at them directly and through the gateway from this process, reading
//! CPU and memory from /proc — and prints a Markdown report on stdout
//! (progress goes to stderr). See docs/BENCHMARKS.md.

// A benchmark binary, not request-path code: a failed invariant may abort the run.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod allocs;
mod client;
mod idle;
mod load;
mod machine;
mod nginx;
mod pair;
mod procs;
mod procstat;
mod report;
mod stdio_start;
mod virtuals;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Result, anyhow};
use clap::Parser;

use crate::client::Upstream;
use crate::load::{Shape, Work};
use crate::machine::Machine;
use crate::pair::{Endpoints, Measured, Timing};
use crate::procstat::MachineTicks;
use crate::report::{Churn, EchoRow, Report};

/// Benchmark mcpgate: direct vs through the gateway.
#[derive(Debug, Parser)]
#[command(name = "mcpgate-bench", version, about)]
struct Cli {
    /// Measured seconds per cell.
    #[arg(long, default_value_t = 3.0)]
    secs: f64,
    /// Warm-up seconds before each slice (not measured).
    #[arg(long, default_value_t = 0.5)]
    warmup: f64,
    /// Each cell's measured time is split into this many direct/gateway
    /// slice pairs, interleaved, so background load hits both sides alike.
    #[arg(long, default_value_t = 3)]
    slices: u32,
    /// Smoke run (~25 s): 0.5 s cells in one slice, 0.2 s warm-up, 1,000 idle sessions.
    #[arg(long)]
    quick: bool,
    /// Concurrency levels for the echo cells.
    #[arg(long, value_delimiter = ',', default_value = "1,16,64")]
    concurrency: Vec<usize>,
    /// Concurrency of the session create+DELETE cells.
    #[arg(long, default_value_t = 16)]
    churn_concurrency: usize,
    /// Idle sessions for the memory measurement.
    #[arg(long, default_value_t = 10_000)]
    idle_sessions: usize,
    /// Open/DELETE rounds of the idle-session measurement (2+ tells allocator
    /// retention from a leak).
    #[arg(long, default_value_t = 2)]
    idle_rounds: usize,
    /// Skip the everything server (Node) cells.
    #[arg(long)]
    skip_node: bool,
    /// Skip the nginx baseline.
    #[arg(long)]
    skip_nginx: bool,
    /// Skip the virtual-server cells (a tools/call through a virtual server of three
    /// members; initialize with 1, 3 and 10 members).
    #[arg(long)]
    skip_virtual: bool,
    /// Extra environment for the gateway processes, KEY=VALUE (repeatable; for
    /// diagnostic runs such as TOKIO_WORKER_THREADS=1 — the default run sets none).
    #[arg(long, value_name = "KEY=VALUE", value_parser = parse_env)]
    gateway_env: Vec<(String, String)>,
    /// TOML appended to the gateway's config (which names the upstream), e.g.
    /// `[session]\nseal_keys = [...]` or `[telemetry]\notlp_endpoint = "..."`: what a
    /// feature costs, measured against the same direct and nginx runs.
    #[arg(long, value_name = "TOML")]
    gateway_toml: Option<String>,
    /// Skip the stdio session-start cells (cold vs warm `initialize`).
    #[arg(long)]
    skip_stdio_start: bool,
    /// Sessions per stdio session-start cell.
    #[arg(long, default_value_t = 20)]
    start_rounds: usize,
    /// `warm` of the warm stdio session-start cell.
    #[arg(long, default_value_t = 4)]
    warm: usize,
    /// Count the proxies' allocations (libc malloc/calloc/realloc uprobes read with
    /// `perf stat`; needs root). The probes' traps inflate that run's CPU figures.
    #[arg(long)]
    allocs: bool,
    /// Directory holding the `mcpgate` and `mcpgate-testkit` binaries
    /// (default: next to this executable).
    #[arg(long)]
    bin_dir: Option<PathBuf>,
}

fn parse_env(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .ok_or_else(|| format!("expected KEY=VALUE, got {s:?}"))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("mcpgate-bench: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        // On Ctrl-C / SIGTERM the run future is dropped, and with it every child guard.
        tokio::select! {
            r = run(cli) => r,
            r = interrupted() => r,
        }
    });
    match result {
        Ok(report) => {
            println!("{report}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("mcpgate-bench: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn interrupted() -> Result<String> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    tokio::select! {
        _ = term.recv() => {}
        r = tokio::signal::ctrl_c() => r?,
    }
    Err(anyhow!("interrupted; stopped all child processes"))
}

async fn run(mut cli: Cli) -> Result<String> {
    if cli.quick {
        (cli.secs, cli.warmup, cli.slices, cli.idle_sessions) = (0.5, 0.2, 1, 1_000);
    }
    let timing = Timing {
        warmup: Duration::try_from_secs_f64(cli.warmup)?,
        window: Duration::try_from_secs_f64(cli.secs)?,
        slices: cli.slices,
    };
    if cli.allocs {
        allocs::enable()?;
    }
    let bins = procs::bin_dir(cli.bin_dir.take())?;
    let root = find_root(&bins);
    let machine = Machine::probe(&root, &bins);
    let ticks = MachineTicks::now();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let baseline_busy = ticks.busy_since(MachineTicks::now());
    let mut rows = Vec::new();
    let mut skipped = Vec::new();
    let nginx_bin = if cli.skip_nginx {
        skipped.push("nginx baseline (--skip-nginx)".to_owned());
        None
    } else {
        let b = nginx::binary();
        if b.is_none() {
            let why = "nginx baseline: no nginx binary (apt-get install nginx, or set MCPGATE_BENCH_NGINX)";
            eprintln!("mcpgate-bench: skipping {why}");
            skipped.push(why.to_owned());
        }
        b
    };
    let nginx_version = nginx_bin.as_deref().map(nginx::version);
    let start_gateway = |url: &str, name: &str| {
        procs::start_gateway(
            &bins,
            url,
            name,
            (&cli.gateway_env, cli.gateway_toml.as_deref()),
        )
    };
    let start_nginx = |url: &str, name: &str| -> Result<Option<nginx::Nginx>> {
        nginx_bin
            .as_deref()
            .map(|b| nginx::start(b, url, name))
            .transpose()
    };

    let churn = {
        let (up, up_url) = procs::start_testkit(&bins, &[])?;
        let (gw, gw_url) = start_gateway(&up_url, "gateway-testkit")?;
        let ng = start_nginx(&up_url, "nginx-testkit")?;
        let ends = Endpoints {
            up: (&up, &up_url),
            gw: (&gw, &gw_url),
            nginx: ng.as_ref().map(|n| (n.proc(), n.url.as_str())),
        };
        echo_cells(Upstream::Testkit, &ends, &cli, timing, &mut rows).await?;
        let c = cli.churn_concurrency;
        let Measured { direct, gw, nginx } =
            pair::compare(&ends, Work::Churn, c, timing, "churn").await?;
        Churn {
            c,
            direct,
            gw,
            nginx,
        }
    };

    // The same server answering every call as a one-event SSE stream: the SSE-answer path
    // at the JSON path's load.
    {
        let (up, up_url) = procs::start_testkit(&bins, &["--always-sse"])?;
        let (gw, gw_url) = start_gateway(&up_url, "gateway-testkit-sse")?;
        let ng = start_nginx(&up_url, "nginx-testkit-sse")?;
        let ends = Endpoints {
            up: (&up, &up_url),
            gw: (&gw, &gw_url),
            nginx: ng.as_ref().map(|n| (n.proc(), n.url.as_str())),
        };
        echo_cells(Upstream::TestkitSse, &ends, &cli, timing, &mut rows).await?;
    }

    let script = root.join("tests/clients/everything_server.mjs");
    let node_modules =
        root.join("tests/clients/node_modules/@modelcontextprotocol/server-everything");
    if cli.skip_node {
        skipped.push("everything server (--skip-node)".to_owned());
    } else if !script.is_file() || !node_modules.is_dir() || machine.node == "not found" {
        let why = format!(
            "everything server: node or {} missing (run scripts/setup-test-deps)",
            node_modules.display()
        );
        eprintln!("mcpgate-bench: skipping {why}");
        skipped.push(why);
    } else {
        let (up, up_url) = procs::start_everything(&script)?;
        let (gw, gw_url) = start_gateway(&up_url, "gateway-everything")?;
        let ng = start_nginx(&up_url, "nginx-everything")?;
        let ends = Endpoints {
            up: (&up, &up_url),
            gw: (&gw, &gw_url),
            nginx: ng.as_ref().map(|n| (n.proc(), n.url.as_str())),
        };
        echo_cells(Upstream::Everything, &ends, &cli, timing, &mut rows).await?;
    }

    let ts_script = root.join("tests/modern/ts_server.mjs");
    if cli.skip_node {
        skipped.push("TypeScript SDK 2.4 server (--skip-node)".to_owned());
    } else if !root
        .join("tests/modern/node_modules/@modelcontextprotocol/server")
        .is_dir()
        || machine.node == "not found"
    {
        let why = "TypeScript SDK 2.4 server: node or tests/modern/node_modules missing (run tests/modern/setup)".to_owned();
        eprintln!("mcpgate-bench: skipping {why}");
        skipped.push(why);
    } else {
        let (up, up_url) = procs::start_ts_modern(&ts_script)?;
        let (gw, gw_url) = start_gateway(&up_url, "gateway-ts-modern")?;
        let ng = start_nginx(&up_url, "nginx-ts-modern")?;
        let ends = Endpoints {
            up: (&up, &up_url),
            gw: (&gw, &gw_url),
            nginx: ng.as_ref().map(|n| (n.proc(), n.url.as_str())),
        };
        echo_cells(Upstream::TsModern, &ends, &cli, timing, &mut rows).await?;
    }

    let virtual_report = if cli.skip_virtual {
        skipped.push("virtual servers (--skip-virtual)".to_owned());
        None
    } else {
        let (kits, urls) = virtuals::start_members(&bins)?;
        let (gw, gw_url) = virtuals::start_gateway(&bins, &urls, &cli.gateway_env)?;
        let ends = Endpoints {
            up: (&kits[0], &urls[0]),
            gw: (&gw, &gw_url),
            nginx: None,
        };
        echo_cells(Upstream::Virtual, &ends, &cli, timing, &mut rows).await?;
        let rounds = if cli.quick { 10 } else { 40 };
        Some(virtuals::initialize_times(&gw_url, rounds).await?)
    };

    let stdio_start = if cli.skip_stdio_start {
        skipped.push("stdio session start (--skip-stdio-start)".to_owned());
        None
    } else {
        let programs = stdio_programs(&bins, &root, cli.skip_node, &mut skipped);
        let rounds = if cli.quick { 4 } else { cli.start_rounds };
        Some(stdio_start::run(&bins, &programs, (cli.warm, rounds), &cli.gateway_env).await?)
    };

    let idle = if cli.idle_sessions > 0 {
        let (up, up_url) = procs::start_testkit(&bins, &[])?;
        let (gw, gw_url) = start_gateway(&up_url, "gateway-idle")?;
        eprintln!(
            "mcpgate-bench: opening {} idle sessions through a fresh gateway",
            cli.idle_sessions
        );
        let pids = (gw.pid(), up.pid());
        let i = idle::run(&gw_url, pids, cli.idle_sessions, 32, cli.idle_rounds).await?;
        eprintln!(
            "mcpgate-bench: idle: {} sessions, {} KiB/session",
            i.opened,
            i.kib_per_session()
                .map_or("–".to_owned(), |k| format!("{k:.1}"))
        );
        Some(i)
    } else {
        None
    };

    let report = Report {
        machine,
        timing,
        rows,
        churn: Some(churn),
        idle,
        baseline_busy,
        gateway_env: cli.gateway_env.clone(),
        gateway_toml: cli.gateway_toml.clone(),
        skipped,
        nginx: nginx_version,
        validation_ns: validation_ns(),
    };
    let mut out = report.render();
    if let Some(v) = virtual_report {
        out.push_str(&v.render());
    }
    if let Some(s) = stdio_start {
        out.push_str(&s.render());
    }
    Ok(out)
}

/// The stdio programs of the session-start cells: the testkit, the everything server
/// (Node) and a Python SDK server, each when it is installed.
fn stdio_programs(
    bins: &Path,
    root: &Path,
    skip_node: bool,
    skipped: &mut Vec<String>,
) -> Vec<(String, Vec<String>)> {
    let s = |p: &Path| p.display().to_string();
    let mut out = vec![(
        "testkit (Rust)".to_owned(),
        vec![s(&bins.join("mcpgate-testkit")), "stdio".to_owned()],
    )];
    let everything = root.join("tests/clients/everything_server.mjs");
    if !skip_node && root.join("tests/clients/node_modules").is_dir() {
        out.push((
            "everything server (Node)".to_owned(),
            vec!["node".to_owned(), s(&everything), "stdio".to_owned()],
        ));
    } else {
        skipped.push("stdio start of the everything server (node or tests/clients/node_modules missing, or --skip-node)".to_owned());
    }
    let python = root.join(".venv/bin/python");
    if python.is_file() {
        out.push((
            "Python SDK 2.3 server".to_owned(),
            vec![
                s(&python),
                s(&root.join("tests/modern/py_server.py")),
                "stdio".to_owned(),
            ],
        ));
    } else {
        skipped.push(
            "stdio start of the Python server (.venv missing: scripts/setup-test-deps)".to_owned(),
        );
    }
    out
}

/// All echo cells for one upstream: each shape × concurrency, direct vs via the gateway.
async fn echo_cells(
    upstream: Upstream,
    ends: &Endpoints<'_>,
    cli: &Cli,
    timing: Timing,
    rows: &mut Vec<EchoRow>,
) -> Result<()> {
    let prewarm = timing.warmup * 4;
    let shapes: &[Shape] = match upstream {
        Upstream::Testkit => &[Shape::OneSession, Shape::ManySessions, Shape::Stateless],
        Upstream::TestkitSse => &[Shape::OneSession],
        Upstream::Everything => &[Shape::OneSession, Shape::ManySessions],
        Upstream::TsModern => &[Shape::Stateless],
        Upstream::Virtual => &[Shape::OneSession, Shape::ManySessions],
    };
    pair::prewarm(ends, Work::Echo(upstream, shapes[0]), prewarm).await?;
    for &shape in shapes {
        for &c in &cli.concurrency {
            let work = Work::Echo(upstream, shape);
            let name = format!("{} {} c={c}", upstream.label(), shape.label());
            let Measured { direct, gw, nginx } =
                pair::compare(ends, work, c, timing, &name).await?;
            rows.push(EchoRow {
                upstream,
                shape,
                c,
                direct,
                gw,
                nginx,
            });
        }
    }
    Ok(())
}

/// What checking one 2026-07-28 request costs the gateway (its `era.rs`/`modern.rs`
/// work on top of the session era's envelope parse): ns per request, in-process.
fn validation_ns() -> f64 {
    use mcpgate_jsonrpc::{Message, modern};
    let body = bytes::Bytes::from_static(br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello from mcpgate-bench"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"mcpgate-bench","version":"0.1.0"}}}}"#);
    let headers = modern::Mirrored {
        version: Some(b"2026-07-28"),
        method: Some(b"tools/call"),
        name: Some(b"echo"),
        duplicated: None,
    };
    const N: u32 = 200_000;
    let start = std::time::Instant::now();
    let mut ok = 0u32;
    for _ in 0..N {
        let Ok(m) = Message::parse(body.clone()) else {
            continue;
        };
        let env = m.modern_envelope();
        ok += u32::from(modern::check(&m, &env, &headers).is_ok());
    }
    assert_eq!(ok, N, "the benchmark's request must pass the check");
    let total = start.elapsed().as_nanos() as f64 / f64::from(N);
    // Without the check: the envelope parse the session era does anyway.
    let start = std::time::Instant::now();
    for _ in 0..N {
        let _ = std::hint::black_box(Message::parse(body.clone()));
    }
    let parse = start.elapsed().as_nanos() as f64 / f64::from(N);
    (total - parse).max(0.0)
}

/// The workspace root: the first ancestor of the binaries (or of the current
/// directory) holding tests/clients/everything_server.mjs.
fn find_root(bins: &Path) -> PathBuf {
    let cwd = std::env::current_dir().unwrap_or_default();
    bins.ancestors()
        .chain(cwd.ancestors())
        .find(|d| d.join("tests/clients/everything_server.mjs").is_file())
        .map_or(cwd.clone(), Path::to_path_buf)
}
