//! Memory per idle session: open many sessions through a fresh gateway, compare
//! its resident memory before and after, then DELETE them all.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use tokio::task::JoinSet;

use crate::client::{Conn, Session, Target};
use crate::procstat;

/// Let the allocator and the gateway's bookkeeping settle before reading RSS.
const SETTLE: Duration = Duration::from_millis(500);

/// What the idle-session run measured.
#[derive(Debug, Default)]
pub(crate) struct IdleRss {
    /// Sessions asked for per round.
    pub(crate) wanted: usize,
    /// Sessions actually opened in the first round.
    pub(crate) opened: usize,
    /// Seconds the first round's opening took.
    pub(crate) open_secs: f64,
    /// (what, gateway VmRSS KiB, gateway open fds), in order: before, then
    /// after each round's opening and after its DELETEs.
    pub(crate) points: Vec<(String, u64, usize)>,
    /// Upstream VmRSS (KiB) before and after the first round's opening.
    pub(crate) up_kib: [u64; 2],
    /// Failures by message.
    pub(crate) errors: BTreeMap<String, u64>,
}

impl IdleRss {
    /// Gateway KiB per open session (first round).
    pub(crate) fn kib_per_session(&self) -> Option<f64> {
        let (before, open) = (self.points.first()?.1, self.points.get(1)?.1);
        (self.opened > 0).then(|| (open as f64 - before as f64) / self.opened as f64)
    }

    /// Gateway KiB per open session at the highest RSS over all rounds, against
    /// the first "before" (includes what the allocator keeps between rounds).
    pub(crate) fn peak_kib_per_session(&self) -> Option<f64> {
        let before = self.points.first()?.1;
        let peak = self.points.iter().map(|p| p.1).max()?;
        (self.wanted > 0).then(|| (peak as f64 - before as f64) / self.wanted as f64)
    }

    /// Upstream KiB per open session (for comparison).
    pub(crate) fn upstream_kib_per_session(&self) -> Option<f64> {
        (self.opened > 0)
            .then(|| (self.up_kib[1] as f64 - self.up_kib[0] as f64) / self.opened as f64)
    }
}

/// Opens `wanted` sessions with `concurrency` workers through the gateway at
/// `url` (pid `gw`, upstream pid `up`), measuring RSS around it, then DELETEs
/// them; `rounds` times, so allocator retention can be told from a leak.
pub(crate) async fn run(
    url: &str,
    (gw, up): (u32, u32),
    wanted: usize,
    concurrency: usize,
    rounds: usize,
) -> Result<IdleRss> {
    let target = Target::parse(url)?;
    let mut out = IdleRss {
        wanted,
        ..IdleRss::default()
    };
    // Warm-up: connections, runtime threads and first allocations are not per-session cost.
    let warm = open_all(&target, concurrency * 2, concurrency).await?;
    close_all(warm, &mut out.errors).await?;
    tokio::time::sleep(SETTLE).await;
    let point = |what: String| -> Result<(String, u64, usize)> {
        Ok((what, procstat::rss_kib(gw)?, procstat::fd_count(gw)))
    };
    out.points.push(point("before".to_owned())?);
    out.up_kib[0] = procstat::rss_kib(up)?;
    for round in 1..=rounds.max(1) {
        let t = Instant::now();
        let held = open_all(&target, wanted, concurrency).await?;
        let open_secs = t.elapsed().as_secs_f64();
        let opened: usize = held.iter().map(|h| h.1.len()).sum();
        tokio::time::sleep(SETTLE).await;
        out.points
            .push(point(format!("round {round}: {opened} sessions open"))?);
        if round == 1 {
            out.open_secs = open_secs;
            out.opened = opened;
            out.up_kib[1] = procstat::rss_kib(up)?;
        }
        close_all(held, &mut out.errors).await?;
        tokio::time::sleep(SETTLE).await;
        out.points
            .push(point(format!("round {round}: after DELETE of all"))?);
    }
    Ok(out)
}

/// DELETEs every held session, each connection's in parallel.
async fn close_all(held: Vec<Held>, errors: &mut BTreeMap<String, u64>) -> Result<()> {
    let mut tasks = JoinSet::new();
    for (mut conn, sessions, open_errors) in held {
        merge(errors, open_errors);
        tasks.spawn(async move {
            let mut errors = BTreeMap::new();
            for s in sessions {
                count(&mut errors, conn.close_session(&s).await);
            }
            errors
        });
    }
    while let Some(joined) = tasks.join_next().await {
        merge(errors, joined?);
    }
    Ok(())
}

type Held = (Conn, Vec<Session>, BTreeMap<String, u64>);

/// Opens `n` sessions spread over `concurrency` connections.
async fn open_all(target: &Arc<Target>, n: usize, concurrency: usize) -> Result<Vec<Held>> {
    let mut tasks = JoinSet::new();
    for w in 0..concurrency {
        let share = n / concurrency + usize::from(w < n % concurrency);
        let target = Arc::clone(target);
        tasks.spawn(async move {
            let mut conn = Conn::open(target).await?;
            let mut sessions = Vec::with_capacity(share);
            let mut errors = BTreeMap::new();
            for _ in 0..share {
                match conn.open_session().await {
                    Ok(s) => sessions.push(s),
                    Err(e) => *errors.entry(format!("{e:#}")).or_default() += 1,
                }
            }
            anyhow::Ok((conn, sessions, errors))
        });
    }
    let mut held = Vec::with_capacity(concurrency);
    while let Some(joined) = tasks.join_next().await {
        held.push(joined??);
    }
    Ok(held)
}

fn count(errors: &mut BTreeMap<String, u64>, r: Result<()>) {
    if let Err(e) = r {
        *errors.entry(format!("{e:#}")).or_default() += 1;
    }
}

fn merge(into: &mut BTreeMap<String, u64>, from: BTreeMap<String, u64>) {
    for (k, v) in from {
        *into.entry(k).or_default() += v;
    }
}
