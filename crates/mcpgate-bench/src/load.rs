//! The load runner: N workers, each on its own keep-alive connection, repeat one
//! operation for a warm-up and then a fixed measuring window; latencies,
//! errors, and the CPU time of watched processes are recorded for the window.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Result, anyhow};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;

use crate::allocs;
use crate::client::{Conn, Session, Target, Upstream};
use crate::procstat::{self, MachineTicks};

/// How the workers of an echo cell use sessions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    /// All workers share one MCP session (each on its own connection).
    OneSession,
    /// Every worker has its own MCP session.
    ManySessions,
    /// MCP 2026-07-28: no session; every request stands alone (headers + `_meta`).
    Stateless,
}

impl Shape {
    /// A label for the report.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Shape::OneSession => "one session",
            Shape::ManySessions => "many sessions",
            Shape::Stateless => "stateless 2026-07-28",
        }
    }
}

/// What each worker repeats.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Work {
    /// `tools/call echo` in an existing session.
    Echo(Upstream, Shape),
    /// initialize → notifications/initialized → DELETE.
    Churn,
}

/// One measured cell.
pub(crate) struct Plan {
    /// Where the workers send requests.
    pub(crate) target: Arc<Target>,
    /// What they repeat.
    pub(crate) work: Work,
    /// How many workers (and connections).
    pub(crate) concurrency: usize,
    /// Unmeasured time before the window.
    pub(crate) warmup: Duration,
    /// The measuring window.
    pub(crate) window: Duration,
    /// Processes whose CPU time is read at the window's start and end.
    pub(crate) watch: Vec<u32>,
}

/// What a cell measured.
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    /// Operations that succeeded in the window.
    pub(crate) ok: u64,
    /// Window length actually used (until the last measured completion).
    pub(crate) secs: f64,
    /// Latencies of successful operations in ns, sorted.
    pub(crate) lat_ns: Vec<u64>,
    /// Failed operations by message.
    pub(crate) errors: BTreeMap<String, u64>,
    /// CPU seconds used in the window by each watched pid, in `Plan::watch` order.
    pub(crate) cpu: Vec<f64>,
    /// Of `cpu`, the seconds spent in user space.
    pub(crate) user: Vec<f64>,
    /// Allocations (libc malloc/calloc/realloc) made in the window by the proxy
    /// (watched pid 1), when the run counts them (`--allocs`).
    pub(crate) allocs: Option<u64>,
    /// Context switches in the window by each watched pid (all threads).
    pub(crate) ctx: Vec<u64>,
    /// CPU seconds used in the window by this (load generator) process.
    pub(crate) self_cpu: f64,
    /// Fraction of the machine's CPU that was busy in the window.
    pub(crate) busy: f64,
    /// Cores' worth of CPU used in the window by processes other than the
    /// watched ones and this one (other load on the machine: noise).
    pub(crate) other_cores: f64,
}

impl Outcome {
    /// Adds `other` (another slice of the same cell) into `self`.
    pub(crate) fn merge(&mut self, mut other: Outcome) {
        let (a, b) = (self.secs, other.secs);
        let weighted = |x: f64, y: f64| {
            if a + b > 0.0 {
                (x * a + y * b) / (a + b)
            } else {
                0.0
            }
        };
        self.busy = weighted(self.busy, other.busy);
        self.other_cores = weighted(self.other_cores, other.other_cores);
        self.ok += other.ok;
        self.secs += other.secs;
        self.lat_ns.append(&mut other.lat_ns);
        self.lat_ns.sort_unstable();
        for (k, v) in other.errors {
            *self.errors.entry(k).or_default() += v;
        }
        let add = |x: &mut Vec<f64>, y: Vec<f64>| {
            x.resize(x.len().max(y.len()), 0.0);
            x.iter_mut().zip(y).for_each(|(x, y)| *x += y);
        };
        add(&mut self.cpu, other.cpu);
        add(&mut self.user, other.user);
        self.allocs = match (self.allocs, other.allocs) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
        };
        self.ctx.resize(self.ctx.len().max(other.ctx.len()), 0);
        self.ctx
            .iter_mut()
            .zip(other.ctx)
            .for_each(|(x, y)| *x += y);
        self.self_cpu += other.self_cpu;
    }

    /// A cell that could not even start (e.g. its sessions could not be opened).
    pub(crate) fn failed(e: &anyhow::Error) -> Outcome {
        let mut errors = BTreeMap::new();
        errors.insert(format!("setup: {}", short(e)), 1);
        Outcome {
            errors,
            ..Outcome::default()
        }
    }

    /// Successful operations per second.
    pub(crate) fn rate(&self) -> f64 {
        if self.secs > 0.0 {
            self.ok as f64 / self.secs
        } else {
            0.0
        }
    }

    /// The `q` quantile latency (nearest rank), if anything succeeded.
    pub(crate) fn quantile(&self, q: f64) -> Option<Duration> {
        let n = self.lat_ns.len();
        if n == 0 {
            return None;
        }
        let rank = ((q * n as f64).ceil() as usize).clamp(1, n);
        Some(Duration::from_nanos(self.lat_ns[rank - 1]))
    }

    /// Number of failed operations.
    pub(crate) fn error_count(&self) -> u64 {
        self.errors.values().sum()
    }

    /// CPU µs per successful operation for watched process `i`.
    pub(crate) fn cpu_us_per_op(&self, i: usize) -> Option<f64> {
        let cpu = self.cpu.get(i)?;
        (self.ok > 0).then(|| cpu * 1e6 / self.ok as f64)
    }

    /// User-space CPU µs per successful operation for watched process `i`.
    pub(crate) fn user_us_per_op(&self, i: usize) -> Option<f64> {
        let user = self.user.get(i)?;
        (self.ok > 0).then(|| user * 1e6 / self.ok as f64)
    }

    /// Kernel CPU µs per successful operation for watched process `i`.
    pub(crate) fn sys_us_per_op(&self, i: usize) -> Option<f64> {
        Some(self.cpu_us_per_op(i)? - self.user_us_per_op(i)?)
    }

    /// Allocations per successful operation made by the proxy, when counted.
    pub(crate) fn allocs_per_op(&self) -> Option<f64> {
        let n = self.allocs?;
        (self.ok > 0).then(|| n as f64 / self.ok as f64)
    }

    /// Context switches per successful operation for watched process `i`.
    pub(crate) fn ctx_per_op(&self, i: usize) -> Option<f64> {
        let ctx = self.ctx.get(i)?;
        (self.ok > 0).then(|| *ctx as f64 / self.ok as f64)
    }

    /// Load generator CPU µs per successful operation.
    pub(crate) fn self_cpu_us_per_op(&self) -> Option<f64> {
        (self.ok > 0).then(|| self.self_cpu * 1e6 / self.ok as f64)
    }
}

/// A worker's state: its connection, its session, and its next request id.
struct Worker {
    conn: Conn,
    session: Option<Session>,
    owns_session: bool,
    work: Work,
    next_id: u64,
}

impl Worker {
    async fn step(&mut self) -> Result<()> {
        match self.work {
            Work::Echo(upstream, Shape::Stateless) => {
                self.next_id += 1;
                self.conn.modern_echo(upstream, self.next_id).await
            }
            Work::Echo(upstream, _) => {
                self.next_id += 1;
                let session = self
                    .session
                    .as_ref()
                    .ok_or_else(|| anyhow!("worker has no session"))?;
                self.conn.echo(upstream, session, self.next_id).await
            }
            Work::Churn => {
                let session = self.conn.open_session().await?;
                self.conn.close_session(&session).await
            }
        }
    }
}

/// What a worker hands back.
struct Measured {
    worker: Worker,
    lat_ns: Vec<u64>,
    errors: BTreeMap<String, u64>,
    last_end: Option<Instant>,
}

/// Runs one cell.
pub(crate) async fn run(plan: &Plan) -> Result<Outcome> {
    let mut setup = Conn::open(Arc::clone(&plan.target)).await?;
    let shared = match plan.work {
        Work::Echo(_, Shape::OneSession) => Some(setup.open_session().await?),
        _ => None,
    };
    let (ready_tx, mut ready_rx) = mpsc::channel::<Result<()>>(plan.concurrency);
    let (times_tx, times_rx) = watch::channel::<Option<(Instant, Instant)>>(None);
    let mut tasks = JoinSet::new();
    for _ in 0..plan.concurrency {
        let target = Arc::clone(&plan.target);
        let (work, shared) = (plan.work, shared.clone());
        let (ready_tx, mut times_rx) = (ready_tx.clone(), times_rx.clone());
        tasks.spawn(async move {
            let worker = match prepare(target, work, shared).await {
                Ok(w) => w,
                Err(e) => {
                    let _ = ready_tx.send(Err(e)).await;
                    return None;
                }
            };
            let _ = ready_tx.send(Ok(())).await;
            let (start, end) = (*times_rx.wait_for(Option::is_some).await.ok()?)?;
            Some(measure(worker, start, end).await)
        });
    }
    drop(ready_tx);
    for _ in 0..plan.concurrency {
        match ready_rx.recv().await {
            Some(Ok(())) => {}
            Some(Err(e)) => {
                tasks.abort_all();
                return Err(e.context("worker setup failed"));
            }
            None => return Err(anyhow!("a worker ended during setup")),
        }
    }
    let go = Instant::now();
    let start = go + plan.warmup;
    let end = start + plan.window;
    let _ = times_tx.send(Some((start, end)));
    tokio::time::sleep_until(start.into()).await;
    let counter = match plan.watch.get(1) {
        Some(&proxy) if allocs::enabled() => Some(allocs::Counter::start(proxy)?),
        _ => None,
    };
    let cpu0 = read_cpu(&plan.watch)?;
    let ctx0: Vec<u64> = plan
        .watch
        .iter()
        .map(|&p| procstat::ctx_switches(p))
        .collect();
    let self0 = procstat::self_cpu_secs()?;
    let ticks0 = MachineTicks::now();
    let wall0 = Instant::now();
    let mut outs = Vec::with_capacity(plan.concurrency);
    while let Some(joined) = tasks.join_next().await {
        outs.push(joined?.ok_or_else(|| anyhow!("a worker was cancelled"))?);
    }
    let cpu1 = read_cpu(&plan.watch)?;
    let allocs = match counter {
        Some(c) => Some(c.stop(wall0.elapsed().as_secs_f64()).await?),
        None => None,
    };
    let ctx1: Vec<u64> = plan
        .watch
        .iter()
        .map(|&p| procstat::ctx_switches(p))
        .collect();
    let self1 = procstat::self_cpu_secs()?;
    let busy = ticks0.busy_since(MachineTicks::now());
    let wall = wall0.elapsed().as_secs_f64().max(1e-9);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let ours: f64 = cpu0
        .iter()
        .zip(&cpu1)
        .map(|(a, b)| (b.0 + b.1) - (a.0 + a.1))
        .sum::<f64>()
        + (self1 - self0);
    let other_cores = (busy * cores - ours / wall).max(0.0);

    let mut out = Outcome {
        cpu: cpu0
            .iter()
            .zip(&cpu1)
            .map(|(a, b)| (b.0 + b.1) - (a.0 + a.1))
            .collect(),
        user: cpu0.iter().zip(&cpu1).map(|(a, b)| b.0 - a.0).collect(),
        allocs,
        ctx: ctx0
            .iter()
            .zip(&ctx1)
            .map(|(a, b)| b.saturating_sub(*a))
            .collect(),
        self_cpu: self1 - self0,
        busy,
        other_cores,
        ..Outcome::default()
    };
    let mut last = start;
    for m in &mut outs {
        out.lat_ns.append(&mut m.lat_ns);
        for (k, v) in std::mem::take(&mut m.errors) {
            *out.errors.entry(k).or_default() += v;
        }
        last = last.max(m.last_end.unwrap_or(start));
    }
    out.ok = out.lat_ns.len() as u64;
    out.lat_ns.sort_unstable();
    out.secs = if out.ok > 0 {
        (last - start).as_secs_f64()
    } else {
        plan.window.as_secs_f64()
    };
    // Clean up the sessions outside the measured window.
    for m in &mut outs {
        if m.worker.owns_session
            && let Some(s) = m.worker.session.take()
        {
            record(
                &mut out.errors,
                "cleanup",
                m.worker.conn.close_session(&s).await,
            );
        }
    }
    if let Some(s) = shared {
        record(&mut out.errors, "cleanup", setup.close_session(&s).await);
    }
    Ok(out)
}

async fn prepare(target: Arc<Target>, work: Work, shared: Option<Session>) -> Result<Worker> {
    let mut conn = Conn::open(target).await?;
    let (session, owns_session) = match (work, shared) {
        (Work::Echo(_, Shape::ManySessions), _) => (Some(conn.open_session().await?), true),
        (_, shared) => (shared, false),
    };
    Ok(Worker {
        conn,
        session,
        owns_session,
        work,
        next_id: 0,
    })
}

async fn measure(mut worker: Worker, start: Instant, end: Instant) -> Measured {
    let mut lat_ns = Vec::new();
    let mut errors = BTreeMap::new();
    let mut last_end = None;
    loop {
        let t = Instant::now();
        if t >= end {
            break;
        }
        let result = worker.step().await;
        let done = Instant::now();
        let failed = result.is_err();
        if t >= start {
            last_end = Some(done);
            match result {
                Ok(()) => lat_ns.push(u64::try_from((done - t).as_nanos()).unwrap_or(u64::MAX)),
                Err(e) => *errors.entry(short(&e)).or_default() += 1,
            }
        }
        if failed {
            // Do not spin on a persistent failure.
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    Measured {
        worker,
        lat_ns,
        errors,
        last_end,
    }
}

fn read_cpu(pids: &[u32]) -> Result<Vec<(f64, f64)>> {
    pids.iter().map(|&p| procstat::cpu_split(p)).collect()
}

fn record(errors: &mut BTreeMap<String, u64>, what: &str, r: Result<()>) {
    if let Err(e) = r {
        *errors.entry(format!("{what}: {}", short(&e))).or_default() += 1;
    }
}

/// An error message bounded in length, to use as a counting key.
fn short(e: &anyhow::Error) -> String {
    let s = format!("{e:#}");
    match s.char_indices().nth(160) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s,
    }
}
