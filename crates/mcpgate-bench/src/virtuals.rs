//! Virtual servers: what a tools/call costs through a virtual server of three members
//! (the echo cells, `Upstream::Virtual`), and how long `initialize` takes with 1, 3 and
//! 10 members (HTTP testkits and stdio testkits) against a plain server.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Result;

use crate::client::{Conn, Target};
use crate::procs::{self, Proc};

const MEMBERS: usize = 10;

/// Ten testkits over HTTP (the members).
pub(crate) fn start_members(bins: &Path) -> Result<(Vec<Proc>, Vec<String>)> {
    let mut procs = Vec::with_capacity(MEMBERS);
    let mut urls = Vec::with_capacity(MEMBERS);
    for _ in 0..MEMBERS {
        let (p, u) = procs::start_testkit(bins, &[])?;
        procs.push(p);
        urls.push(u);
    }
    Ok((procs, urls))
}

/// A gateway with: the virtual server `v` at `/mcp` — the HTTP testkits `k0`, `k1`,
/// `k2`, names prefixed only on collision and `echo` hidden on `k1` and `k2`, so its
/// `echo` is `k0`'s under its own name (the echo cells call the same tool directly and
/// through it); virtual servers `h1`, `h3`, `h10` of 1, 3, 10 HTTP testkits and `t1`,
/// `t3`, `t10` of 1, 3, 10 stdio testkits; and the plain servers `k0` and `s0`.
pub(crate) fn start_gateway(
    bins: &Path,
    urls: &[String],
    env: &[(String, String)],
) -> Result<(Proc, String)> {
    let kit = bins.join("mcpgate-testkit").display().to_string();
    let mut t = String::new();
    for (i, u) in urls.iter().enumerate() {
        t.push_str(&format!(
            "[[server]]\nname = \"k{i}\"\ntransport = \"streamable-http\"\nurl = {u:?}\n"
        ));
        t.push_str(&format!(
            "[[server]]\nname = \"s{i}\"\ntransport = \"stdio\"\ncommand = [{kit:?}, \"stdio\"]\n"
        ));
    }
    t.push_str("[[virtual]]\nname = \"v\"\ndefault = true\nprefix = \"on_collision\"\n");
    for i in 0..3 {
        t.push_str(&format!("[[virtual.member]]\nserver = \"k{i}\"\n"));
        if i > 0 {
            t.push_str("tools = { deny = [\"echo\"] }\n");
        }
    }
    for n in [1, 3, MEMBERS] {
        for kind in ["h", "t"] {
            let server = if kind == "h" { "k" } else { "s" };
            t.push_str(&format!("[[virtual]]\nname = \"{kind}{n}\"\n"));
            for i in 0..n {
                t.push_str(&format!("[[virtual.member]]\nserver = \"{server}{i}\"\n"));
            }
        }
    }
    let (p, base) = procs::start_gateway_config(bins, &t, "gateway-virtual", env)?;
    Ok((p, format!("{base}/mcp")))
}

/// Initialize times of one mount.
#[derive(Debug)]
pub(crate) struct InitRow {
    what: String,
    members: usize,
    median: Duration,
    p90: Duration,
}

/// The initialize measurement.
#[derive(Debug)]
pub(crate) struct Initialize {
    rows: Vec<InitRow>,
    rounds: usize,
}

/// `rounds` sequential sessions (initialize + initialized, timed; then DELETE) on each
/// mount of the gateway at `gw_url` (`…/mcp`).
pub(crate) async fn initialize_times(gw_url: &str, rounds: usize) -> Result<Initialize> {
    let base = gw_url.trim_end_matches("/mcp");
    let mounts = [
        ("plain server, HTTP", "k0", 1),
        ("virtual, HTTP members", "h1", 1),
        ("virtual, HTTP members", "h3", 3),
        ("virtual, HTTP members", "h10", MEMBERS),
        ("plain server, stdio", "s0", 1),
        ("virtual, stdio members", "t1", 1),
        ("virtual, stdio members", "t3", 3),
        ("virtual, stdio members", "t10", MEMBERS),
    ];
    let mut rows = Vec::new();
    for (what, mount, members) in mounts {
        let target = Target::parse(&format!("{base}/servers/{mount}/mcp"))?;
        let mut conn = Conn::open(target).await?;
        let mut times = Vec::with_capacity(rounds);
        for _ in 0..rounds {
            let t0 = Instant::now();
            let s = conn.open_session().await?;
            times.push(t0.elapsed());
            conn.close_session(&s).await?;
        }
        times.sort();
        eprintln!(
            "mcpgate-bench: initialize {what} ({members}): median {:?}",
            times[times.len() / 2]
        );
        rows.push(InitRow {
            what: what.to_owned(),
            members,
            median: times[times.len() / 2],
            p90: times[(times.len() * 9 / 10).min(times.len() - 1)],
        });
    }
    Ok(Initialize { rows, rounds })
}

impl Initialize {
    /// The report's section.
    pub(crate) fn render(&self) -> String {
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        let mut s = format!(
            "\n## Virtual servers: initialize\n\n`initialize` + `notifications/initialized` through the gateway, {} sequential sessions per row (each DELETEd before the next; the time of one member session is what the plain server row shows).\n\n| upstream | members | median ms | p90 ms |\n|---|---:|---:|---:|\n",
            self.rounds
        );
        for r in &self.rows {
            s.push_str(&format!(
                "| {} | {} | {:.2} | {:.2} |\n",
                r.what,
                r.members,
                ms(r.median),
                ms(r.p90)
            ));
        }
        s
    }
}
