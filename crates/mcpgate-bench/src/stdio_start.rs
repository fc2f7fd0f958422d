//! stdio session start: `initialize` (+ `notifications/initialized`) through the gateway
//! when each session's child is started for it ("cold") and when it was started ahead
//! (`warm = N`), and what the N idle warm children cost. One gateway per upstream program
//! mounts it twice (`cold`, `warm`); rounds are sequential, each session DELETEd and the
//! gateway's children settled (the warm pool refilled) before the next, so a warm round
//! meets a full pool, as a session arriving at a steady rate would.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};

use crate::client::{Conn, Target};
use crate::procs;

/// One upstream program's figures.
pub(crate) struct StartRow {
    what: String,
    cold: Vec<Duration>,
    warm: Vec<Duration>,
    /// Resident KiB of the warm children (and their descendants) while idle.
    idle_kib: u64,
}

/// The section: a row per program.
pub(crate) struct StdioStart {
    rows: Vec<StartRow>,
    warm: usize,
    rounds: usize,
}

/// Measures `programs` (a name and a command line each).
pub(crate) async fn run(
    bins: &Path,
    programs: &[(String, Vec<String>)],
    (warm, rounds): (usize, usize),
    env: &[(String, String)],
) -> Result<StdioStart> {
    let mut rows = Vec::new();
    for (what, command) in programs {
        let cmd = command
            .iter()
            .map(|a| format!("{a:?}"))
            .collect::<Vec<_>>()
            .join(", ");
        let toml = format!(
            "[[server]]\nname = \"cold\"\ntransport = \"stdio\"\ncommand = [{cmd}]\n\
             [[server]]\nname = \"warm\"\ntransport = \"stdio\"\ncommand = [{cmd}]\nwarm = {warm}\n"
        );
        let (gw, base) = procs::start_gateway_config(bins, &toml, "gateway-stdio-start", env)?;
        settle(gw.pid(), warm, LOAD).await?;
        let idle_kib = tree_rss_kib(gw.pid());
        let cold = rounds_of(
            &format!("{base}/servers/cold/mcp"),
            (gw.pid(), warm),
            rounds,
            None,
        )
        .await?;
        let warmed = rounds_of(
            &format!("{base}/servers/warm/mcp"),
            (gw.pid(), warm),
            rounds,
            Some(LOAD),
        )
        .await?;
        eprintln!(
            "mcpgate-bench: stdio start, {what}: cold p50 {:?}, warm p50 {:?}, {warm} idle children {idle_kib} KiB",
            pct(&cold, 50),
            pct(&warmed, 50)
        );
        rows.push(StartRow {
            what: what.clone(),
            cold,
            warm: warmed,
            idle_kib,
        });
    }
    Ok(StdioStart { rows, warm, rounds })
}

/// How long a just-started child gets to load before the next round (so that a warm
/// round is not slowed by its replacement's start competing for the CPU).
const LOAD: Duration = Duration::from_millis(1200);

/// `rounds` sessions on `url`; after each, the gateway `gw.0` settles at `gw.1` children
/// and, with `load`, waits that long more.
async fn rounds_of(
    url: &str,
    gw: (u32, usize),
    rounds: usize,
    load: Option<Duration>,
) -> Result<Vec<Duration>> {
    let mut conn = Conn::open(Target::parse(url)?).await?;
    let mut times = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let t0 = Instant::now();
        let s = conn.open_session().await?;
        times.push(t0.elapsed());
        conn.close_session(&s).await?;
        settle(gw.0, gw.1, load.unwrap_or_default()).await?;
    }
    times.sort();
    Ok(times)
}

/// Waits until the gateway has exactly `n` stdio children (its reaper aside): the warm
/// pool is full and no session's child is left; then `load` more.
async fn settle(gw: u32, n: usize, load: Duration) -> Result<()> {
    let until = Instant::now() + Duration::from_secs(30);
    while stdio_children(gw).len() != n {
        if Instant::now() > until {
            bail!("the gateway's stdio children did not settle at {n}");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(load).await;
    Ok(())
}

/// `(pid, ppid, rss KiB, is the reaper)` of every process.
fn processes() -> Vec<(u32, u32, u64, bool)> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in dir.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
            continue;
        };
        let field = |k: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(k))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse::<u64>().ok())
        };
        let ppid = field("PPid:")
            .and_then(|p| u32::try_from(p).ok())
            .unwrap_or(0);
        let reaper = std::fs::read(format!("/proc/{pid}/cmdline"))
            .is_ok_and(|c| c.split(|b| *b == 0).nth(1) == Some(b"reaper"));
        out.push((pid, ppid, field("VmRSS:").unwrap_or(0), reaper));
    }
    out
}

fn stdio_children(gw: u32) -> Vec<u32> {
    processes()
        .into_iter()
        .filter(|(_, ppid, _, reaper)| *ppid == gw && !reaper)
        .map(|(pid, ..)| pid)
        .collect()
}

/// Resident KiB of the gateway's stdio children and all their descendants.
fn tree_rss_kib(gw: u32) -> u64 {
    let all = processes();
    let mut inside: Vec<u32> = stdio_children(gw);
    let mut i = 0;
    while i < inside.len() {
        let parent = inside[i];
        inside.extend(all.iter().filter(|p| p.1 == parent).map(|p| p.0));
        i += 1;
    }
    all.iter()
        .filter(|p| inside.contains(&p.0))
        .map(|p| p.2)
        .sum()
}

fn pct(sorted: &[Duration], p: usize) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() - 1) * p).div_ceil(100).min(sorted.len() - 1)]
}

impl StdioStart {
    /// The report's section.
    pub(crate) fn render(&self) -> String {
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        let mut s = format!(
            "\n## stdio session start: cold vs warm\n\n`initialize` + `notifications/initialized` through the gateway, {} sequential sessions per cell (each DELETEd and the gateway's children settled before the next; in the warm cell also 1.2 s for the replacement child to load); cold: the session's child is started for it; warm: `warm = {}`. p99 of {} rounds is their maximum.\n\n| upstream program | cold p50 ms | cold p99 ms | warm p50 ms | warm p99 ms | cold ÷ warm (p50) | {} idle warm children, RSS MiB |\n|---|--:|--:|--:|--:|--:|--:|\n",
            self.rounds, self.warm, self.rounds, self.warm
        );
        for r in &self.rows {
            let (c50, w50) = (ms(pct(&r.cold, 50)), ms(pct(&r.warm, 50)));
            s.push_str(&format!(
                "| {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.0} | {:.1} |\n",
                r.what,
                c50,
                ms(pct(&r.cold, 99)),
                w50,
                ms(pct(&r.warm, 99)),
                if w50 > 0.0 { c50 / w50 } else { 0.0 },
                r.idle_kib as f64 / 1024.0
            ));
        }
        s
    }
}
