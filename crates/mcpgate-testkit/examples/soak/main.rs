//! Soak test for mcpgate (run by `scripts/soak`): a gateway in front of two testkit
//! upstreams (one Streamable HTTP server, one stdio command: a process per session) and
//! `SESSIONS` client workers that churn sessions for `SECONDS`: initialize →
//! `notifications/initialized` → a few tool calls (`echo`, `add`, `notify` with progress,
//! `slow`, `tools/list`, `ping`, `resources/read`; some sessions also open a GET stream,
//! subscribe and `touch`) → DELETE, or — some of them — abandoned without DELETE, for the
//! gateway's idle timeout to reap. It samples the gateway's RSS every second, waits for
//! every session to drain after the load, stops the gateway with SIGTERM, and prints a
//! Markdown report with a verdict: RSS must not grow beyond noise between the warm-up
//! and the end, and no session, stdio child or upstream session may be left.
//!
//! Everything runs on loopback; the processes it starts are stopped when it ends.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Parser;
use serde_json::Value;

mod client;
mod counters;
mod process;
mod procfs;
mod samples;
mod worker;

use client::{metric, metrics_text};
use counters::{Counters, load};
use process::start;
use procfs::{children_of, cpu_ticks, loadavg, open_fds, proc_status_kib, rss_kib};
use samples::{Sample, mib, slope_kib_per_min, window};
use worker::{Rng, Worker};

/// Soak mcpgate with churning sessions and report its memory over time.
#[derive(Debug, Parser)]
#[command(name = "soak")]
struct Args {
    /// How long the load runs, in seconds.
    #[arg(default_value_t = 300)]
    seconds: u64,
    /// Concurrent client workers; each one always has (at most) one session.
    #[arg(default_value_t = 200)]
    sessions: usize,
    /// Where the `mcpgate` and `mcpgate-testkit` binaries are (default: next to this
    /// example's own folder, i.e. `target/release`).
    #[arg(long)]
    bin_dir: Option<PathBuf>,
    /// Think time between a worker's requests, in ms: MIN-MAX.
    #[arg(long, default_value = "50-250")]
    think_ms: String,
    /// Percent of sessions abandoned without DELETE (reaped by the idle timeout).
    #[arg(long, default_value_t = 10)]
    drop_percent: u64,
    /// Percent of sessions that open a GET stream, subscribe and `touch`.
    #[arg(long, default_value_t = 25)]
    get_percent: u64,
    /// The gateway's `session.idle_timeout`, in seconds.
    #[arg(long, default_value_t = 5)]
    idle_timeout: u64,
}

fn bin_dir(args: &Args) -> Result<PathBuf> {
    if let Some(d) = &args.bin_dir {
        return Ok(d.clone());
    }
    let exe = std::env::current_exe()?;
    // target/release/examples/soak → target/release
    exe.parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .context("cannot find the binaries' folder")
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    match run(args).await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("soak: {e:#}");
            ExitCode::from(2)
        }
    }
}

#[allow(clippy::too_many_lines)] // one linear script: start, load, drain, stop, report
async fn run(args: Args) -> Result<bool> {
    let bins = bin_dir(&args)?;
    let (gw_bin, tk_bin) = (bins.join("mcpgate"), bins.join("mcpgate-testkit"));
    for b in [&gw_bin, &tk_bin] {
        if !b.exists() {
            bail!(
                "{} not found (cargo build --release -p mcpgate -p mcpgate-testkit)",
                b.display()
            );
        }
    }
    let (think_min, think_max) = args
        .think_ms
        .split_once('-')
        .and_then(|(a, b)| Some((a.parse::<u64>().ok()?, b.parse::<u64>().ok()?)))
        .context("--think-ms MIN-MAX")?;

    // The upstreams and the gateway.
    let mut tk = Command::new(&tk_bin);
    tk.args(["http", "--listen", "127.0.0.1:0"]);
    let (mut testkit, upstream_url) = start(tk, "LISTENING ")?;
    let dir = std::env::temp_dir().join(format!("mcpgate-soak-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let cfg = dir.join("mcpgate.toml");
    std::fs::write(
        &cfg,
        format!(
            "[listen]\nkeep_alive = \"5s\"\n\n[session]\nidle_timeout = \"{}s\"\nrequest_timeout = \"30s\"\n\n\
             [[server]]\nname = \"http\"\ntransport = \"streamable-http\"\nurl = \"{upstream_url}\"\n\n\
             [[server]]\nname = \"stdio\"\ntransport = \"stdio\"\ncommand = [{:?}, \"stdio\"]\n",
            args.idle_timeout,
            tk_bin.display().to_string()
        ),
    )?;
    let log_path = dir.join("mcpgate.log");
    let mut gw = Command::new(&gw_bin);
    gw.arg("--config")
        .arg(&cfg)
        .args(["--listen", "127.0.0.1:0"])
        .env(
            "RUST_LOG",
            std::env::var("MCPGATE_SOAK_LOG").unwrap_or_else(|_| "warn".into()),
        )
        .stderr(std::fs::File::create(&log_path)?);
    let (mut gateway, base) = start(gw, "mcpgate listening on ")?;
    let pid = gateway.pid();
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()?;
    let stream_http = reqwest::Client::builder().build()?;
    eprintln!(
        "soak: gateway {base} (pid {pid}), HTTP testkit {upstream_url}, stdio testkit {}; \
         {} workers for {} s; log {}",
        tk_bin.display(),
        args.sessions,
        args.seconds,
        log_path.display()
    );

    tokio::time::sleep(Duration::from_secs(1)).await;
    let rss_start = rss_kib(pid);
    let fds_start = open_fds(pid);
    let load_start_avg = loadavg();
    let cpu_start = cpu_ticks(pid);

    // The load.
    let counters = Arc::new(Counters::default());
    let started = Instant::now();
    let deadline = started + Duration::from_secs(args.seconds);
    let stopping = Arc::new(AtomicBool::new(false));
    let samples: Arc<Mutex<Vec<Sample>>> = Arc::default();
    let sampler = {
        let (samples, stopping, http, base) = (
            Arc::clone(&samples),
            Arc::clone(&stopping),
            http.clone(),
            base.clone(),
        );
        let counters = Arc::clone(&counters);
        let every = (args.seconds / 10).max(1);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            let mut n = 0u64;
            while !stopping.load(Ordering::Relaxed) {
                tick.tick().await;
                let sessions = metric(&http, &base, "mcpgate_sessions_active")
                    .await
                    .unwrap_or(-1.0);
                let s = Sample {
                    t: started.elapsed().as_secs_f64(),
                    rss: rss_kib(pid),
                    sessions,
                };
                if n.is_multiple_of(every) {
                    eprintln!(
                        "soak: t={:>4.0}s rss {} sessions {} calls ok {} failed {} load {}",
                        s.t,
                        mib(s.rss),
                        s.sessions,
                        load(&counters.calls_ok),
                        load(&counters.calls_failed),
                        loadavg()
                    );
                }
                n += 1;
                samples.lock().unwrap_or_else(|p| p.into_inner()).push(s);
            }
        })
    };
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64)
        | 1;
    let mut workers = Vec::new();
    for n in 0..args.sessions {
        let w = Worker {
            n,
            http: http.clone(),
            stream_http: stream_http.clone(),
            base: base.clone(),
            counters: Arc::clone(&counters),
            rng: Rng(seed.wrapping_mul(n as u64 * 2 + 1) | 1),
            think: (think_min, think_max),
            drop_percent: args.drop_percent,
            get_percent: args.get_percent,
        };
        workers.push(tokio::spawn(w.run(deadline)));
        // Ramp up over the first second rather than all at once.
        tokio::time::sleep(Duration::from_millis(1000 / args.sessions.max(1) as u64)).await;
    }
    let interrupted = tokio::select! {
        _ = futures::future::join_all(workers) => false,
        _ = tokio::signal::ctrl_c() => true,
    };
    let load_secs = started.elapsed().as_secs_f64();
    let rss_load_end = rss_kib(pid);
    let cpu_load = cpu_ticks(pid).saturating_sub(cpu_start);
    let load_end_avg = loadavg();

    // Drain: abandoned sessions go after the idle timeout (their GET streams after a
    // keep-alive notices the closed connection).
    let drain_start = Instant::now();
    let drain_limit = Duration::from_secs(args.idle_timeout * 3 + 30);
    let mut sessions_left = -1.0;
    let mut children_metric = -1.0;
    while drain_start.elapsed() < drain_limit {
        sessions_left = metric(&http, &base, "mcpgate_sessions_active")
            .await
            .unwrap_or(-1.0);
        children_metric = metric(&http, &base, "mcpgate_stdio_children")
            .await
            .unwrap_or(-1.0);
        if sessions_left == 0.0 && children_metric == 0.0 && children_of(pid).is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let drain_secs = drain_start.elapsed().as_secs_f64();
    tokio::time::sleep(Duration::from_secs(1)).await;
    stopping.store(true, Ordering::Relaxed);
    let _ = sampler.await;
    let rss_end = rss_kib(pid);
    let hwm = proc_status_kib(pid, "VmHWM");
    let fds_end = open_fds(pid);
    let children_left = children_of(pid);
    let metrics = metrics_text(&http, &base).await;
    let stats_url = format!("{}/stats", upstream_url.trim_end_matches("/mcp"));
    let upstream_stats: Value = match http.get(stats_url).send().await {
        Ok(r) => serde_json::from_str(&r.text().await.unwrap_or_default()).unwrap_or(Value::Null),
        Err(_) => Value::Null,
    };
    let warnings: BTreeMap<String, u64> = std::fs::read_to_string(&log_path)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains(" WARN ") || l.contains(" ERROR "))
        .fold(BTreeMap::new(), |mut m, l| {
            // The message without timestamp and fields.
            let msg = l
                .split_once(": ")
                .map_or(l, |(_, m)| m)
                .split(" session=")
                .next()
                .unwrap_or(l)
                .to_owned();
            *m.entry(msg).or_insert(0) += 1;
            m
        });
    let exit_code = gateway.stop(Duration::from_secs(40));
    let leftover_after_exit = children_of(pid);
    let _ = testkit.stop(Duration::from_secs(5));

    // The verdict.
    let samples = samples.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let in_load: Vec<Sample> = samples
        .iter()
        .copied()
        .filter(|s| s.t <= load_secs)
        .collect();
    let peak = in_load.iter().map(|s| s.rss).max().unwrap_or(0).max(hwm);
    let warm = window(&in_load, load_secs, 0.2, 0.3);
    let mid = window(&in_load, load_secs, 0.45, 0.55);
    let late = window(&in_load, load_secs, 0.9, 1.0);
    let second_half: Vec<Sample> = in_load
        .iter()
        .copied()
        .filter(|s| s.t >= load_secs / 2.0)
        .collect();
    let slope = slope_kib_per_min(&second_half);
    let noise = (warm / 10).max(4 * 1024);
    let rss_ok = late <= warm + noise && rss_end <= warm + noise;
    let upstream_left = upstream_stats["sessions_active"].as_u64();
    let clean = sessions_left == 0.0
        && children_metric == 0.0
        && children_left.is_empty()
        && leftover_after_exit.is_empty()
        && upstream_left == Some(0)
        && exit_code == Some(0);
    let c = &counters;
    let calls = load(&c.calls_ok) + load(&c.calls_failed);
    let errors: u64 = c
        .errors
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .values()
        .map(|(n, _)| n)
        .sum();

    println!("### Soak: {} s, {} sessions\n", args.seconds, args.sessions);
    println!(
        "- load: {} workers; each: initialize → initialized → 3–10 requests ({}–{} ms think \
         time: echo 30%, notify 25% (1–8 log + progress notifications), add 15%, tools/list 10%, \
         ping, slow, resources/read 5% each, touch 5% on GET sessions) → DELETE; {}% of sessions \
         abandoned without DELETE (idle_timeout {} s), {}% with a GET stream + subscribe; \
         servers alternate between the HTTP and the stdio testkit{}",
        args.sessions,
        think_min,
        think_max,
        args.drop_percent,
        args.idle_timeout,
        args.get_percent,
        if interrupted {
            " — **interrupted (Ctrl-C)**"
        } else {
            ""
        }
    );
    println!(
        "- machine: {} cores; load average {} at the start, {} at the end of the load",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        load_start_avg,
        load_end_avg
    );
    println!(
        "- totals: {} sessions opened ({} DELETEd, {} abandoned), {} initialize failures; \
         {} requests ({} ok, {} failed, {:.0}/s); {} notifications on POST streams; \
         {} GET streams with {} events; gateway CPU {:.1} s ({:.2} cores)\n",
        load(&c.sessions_opened),
        load(&c.sessions_deleted),
        load(&c.sessions_abandoned),
        load(&c.init_failed),
        calls,
        load(&c.calls_ok),
        load(&c.calls_failed),
        calls as f64 / load_secs,
        load(&c.notifications),
        load(&c.get_streams),
        load(&c.get_events),
        cpu_load as f64 / 100.0,
        cpu_load as f64 / 100.0 / load_secs
    );
    println!("| gateway | VmRSS | note |\n|---|--:|---|");
    println!(
        "| start (no session) | {} | {} open fds |",
        mib(rss_start),
        fds_start
    );
    println!("| warm (median 20–30% of the load) | {} | |", mib(warm));
    println!("| middle (median 45–55%) | {} | |", mib(mid));
    println!("| late (median 90–100%) | {} | |", mib(late));
    println!("| peak | {} | VmHWM {} |", mib(peak), mib(hwm));
    println!("| end of the load | {} | |", mib(rss_load_end));
    println!(
        "| end, after the drain ({drain_secs:.1} s) | {} | {} open fds |",
        mib(rss_end),
        fds_end
    );
    println!("\n- RSS slope over the second half of the load: {slope:+.0} KiB/min");
    println!(
        "- left after the drain: {sessions_left} sessions, {children_metric} stdio children \
         (metric), {} child processes (/proc), {} sessions at the HTTP testkit; \
         gateway exit code after SIGTERM {:?}, {} processes left after it exited",
        children_left.len(),
        upstream_left.map_or("?".to_owned(), |n| n.to_string()),
        exit_code,
        leftover_after_exit.len()
    );
    for name in [
        "mcpgate_sessions_opened_total",
        "mcpgate_backlog_dropped_total",
    ] {
        let v = metrics
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
            .unwrap_or("0");
        println!("- {name}: {v}");
    }
    let by_label: Vec<&str> = metrics
        .lines()
        .filter(|l| {
            l.starts_with("mcpgate_sessions_closed_total{")
                || l.starts_with("mcpgate_upstream_errors_total{")
        })
        .collect();
    println!("- {}", by_label.join(", "));
    println!("- client-side errors: {errors}");
    for (what, (n, detail)) in c.errors.lock().unwrap_or_else(|p| p.into_inner()).iter() {
        println!("  - {n} × {what}: {detail}");
    }
    if warnings.is_empty() {
        println!("- gateway warnings: none");
    } else {
        println!("- gateway warnings:");
        for (msg, n) in &warnings {
            println!("  - {n} × {msg}");
        }
    }
    println!(
        "\n**Verdict:** RSS {} (late {} and after the drain {} vs warm {}; noise allowance {}), \
         cleanup {}, {} client-side errors.",
        if rss_ok {
            "flat — PASS"
        } else {
            "grew — FAIL"
        },
        mib(late),
        mib(rss_end),
        mib(warm),
        mib(noise),
        if clean {
            "complete — PASS"
        } else {
            "incomplete — FAIL"
        },
        errors
    );
    let pass = rss_ok && clean && !interrupted;
    if pass {
        let _ = std::fs::remove_dir_all(&dir);
    } else {
        eprintln!("soak: the gateway's log is kept: {}", log_path.display());
    }
    Ok(pass)
}
