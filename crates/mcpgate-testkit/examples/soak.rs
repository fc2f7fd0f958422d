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
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use clap::Parser;
use futures::StreamExt;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::{Value, json};

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

// ---------------------------------------------------------------------------------------
// /proc readings

fn proc_status_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn rss_kib(pid: u32) -> u64 {
    proc_status_kib(pid, "VmRSS")
}

fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, Iterator::count)
}

/// utime + stime of `pid`, in clock ticks (100 per second on Linux).
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return 0;
    };
    let f: Vec<&str> = rest.split_whitespace().collect();
    let n = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    n(11) + n(12)
}

/// Live (non-zombie) child processes of `pid`.
fn children_of(pid: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<u32>().ok())
        .filter(|p| {
            let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
            let Some((_, rest)) = stat.rsplit_once(')') else {
                return false;
            };
            let mut f = rest.split_whitespace();
            let state = f.next().unwrap_or("");
            let ppid: u32 = f.next().and_then(|x| x.parse().ok()).unwrap_or(0);
            ppid == pid && state != "Z"
        })
        .collect()
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

// ---------------------------------------------------------------------------------------
// processes

/// A child process that is sent SIGTERM (then SIGKILL) when dropped.
struct Proc {
    child: Option<Child>,
}

impl Proc {
    fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// SIGTERM, then waits up to `limit`; SIGKILL after that. The exit code, if any.
    fn stop(&mut self, limit: Duration) -> Option<i32> {
        let mut child = self.child.take()?;
        let pid = i32::try_from(child.id()).ok()?;
        let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
        let until = Instant::now() + limit;
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return status.code();
            }
            if Instant::now() > until {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.stop(Duration::from_secs(5));
    }
}

/// Starts `cmd` and returns it with the first stdout line stripped of `prefix`.
fn start(mut cmd: Command, prefix: &str) -> Result<(Proc, String)> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot start {cmd:?}"))?;
    let stdout = child.stdout.take().context("stdout")?;
    let proc = Proc { child: Some(child) };
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line)?;
    let url = line
        .trim()
        .strip_prefix(prefix)
        .ok_or_else(|| anyhow!("unexpected first line {line:?} from {cmd:?}"))?
        .to_owned();
    Ok((proc, url))
}

// ---------------------------------------------------------------------------------------
// counters

#[derive(Default)]
struct Counters {
    sessions_opened: AtomicU64,
    sessions_deleted: AtomicU64,
    sessions_abandoned: AtomicU64,
    init_failed: AtomicU64,
    calls_ok: AtomicU64,
    calls_failed: AtomicU64,
    notifications: AtomicU64,
    get_streams: AtomicU64,
    get_events: AtomicU64,
    errors: Mutex<BTreeMap<String, (u64, String)>>,
}

impl Counters {
    fn error(&self, what: String, detail: impl Into<String>) {
        let mut e = self.errors.lock().unwrap_or_else(|p| p.into_inner());
        let entry = e.entry(what).or_insert((0, detail.into()));
        entry.0 += 1;
    }
}

fn load(c: &AtomicU64) -> u64 {
    c.load(Ordering::Relaxed)
}

// ---------------------------------------------------------------------------------------
// the client side

/// xorshift64*: plenty for picking operations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi.saturating_sub(lo) + 1)
    }
}

const VERSION: &str = "2025-11-25";

/// A JSON answer or the messages of an SSE answer.
struct Answer {
    status: u16,
    session: Option<String>,
    messages: Vec<Value>,
}

async fn post(
    http: &reqwest::Client,
    url: &str,
    sid: Option<&str>,
    body: &Value,
) -> Result<Answer> {
    let mut req = http
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(body.to_string());
    if let Some(s) = sid {
        req = req
            .header("mcp-session-id", s)
            .header("mcp-protocol-version", VERSION);
    }
    let resp = req.send().await?;
    let status = resp.status().as_u16();
    let session = resp
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let sse = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    let text = resp.text().await?;
    let messages = if sse {
        text.split("\n\n")
            .filter_map(|ev| {
                let data: Vec<&str> = ev
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .map(str::trim_start)
                    .collect();
                serde_json::from_str(&data.join("\n")).ok()
            })
            .collect()
    } else if text.is_empty() {
        Vec::new()
    } else {
        vec![serde_json::from_str(&text).context("answer is not JSON")?]
    };
    Ok(Answer {
        status,
        session,
        messages,
    })
}

/// What a call checks in its answer.
enum Expect {
    Text(String),
    /// `notify`: this many progress notifications, as many log notifications (unless
    /// the session has a GET stream: over stdio the gateway cannot tell that a log
    /// notification belongs to the call, so it goes to the GET stream), then `tag:count`.
    Notify {
        tag: String,
        count: u64,
        get_open: bool,
    },
    /// Any result.
    Result,
}

struct Worker {
    n: usize,
    http: reqwest::Client,
    stream_http: reqwest::Client,
    base: String,
    counters: Arc<Counters>,
    rng: Rng,
    think: (u64, u64),
    drop_percent: u64,
    get_percent: u64,
}

impl Worker {
    async fn run(mut self, deadline: Instant) {
        let mut round = 0u64;
        while Instant::now() < deadline {
            round += 1;
            let server = if (self.n as u64 + round).is_multiple_of(2) {
                "http"
            } else {
                "stdio"
            };
            if let Err(e) = self.session(server, round, deadline).await {
                self.counters
                    .error(format!("{server}: transport error"), format!("{e:#}"));
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }

    async fn think(&mut self) {
        let ms = self.rng.range(self.think.0, self.think.1);
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }

    /// One session, from initialize to DELETE (or abandonment).
    async fn session(&mut self, server: &str, round: u64, deadline: Instant) -> Result<()> {
        let url = format!("{}/servers/{server}/mcp", self.base);
        let c = Arc::clone(&self.counters);
        let init = json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
            "protocolVersion": VERSION, "capabilities": {},
            "clientInfo": {"name": "mcpgate-soak", "version": "0"}}});
        let a = post(&self.http, &url, None, &init).await?;
        let ok = a.status == 200
            && a.messages
                .last()
                .is_some_and(|m| m.pointer("/result/protocolVersion").is_some());
        let Some(sid) = a.session.filter(|_| ok) else {
            c.init_failed.fetch_add(1, Ordering::Relaxed);
            let detail = a.messages.last().map(Value::to_string).unwrap_or_default();
            c.error(format!("{server} initialize: HTTP {}", a.status), detail);
            self.think().await;
            return Ok(());
        };
        c.sessions_opened.fetch_add(1, Ordering::Relaxed);
        let note = json!({"jsonrpc":"2.0","method":"notifications/initialized"});
        let a = post(&self.http, &url, Some(&sid), &note).await?;
        if a.status != 202 {
            c.error(format!("{server} initialized: HTTP {}", a.status), "");
        }
        let with_get = self.rng.below(100) < self.get_percent;
        let get = if with_get {
            Some(self.open_get(&url, &sid))
        } else {
            None
        };
        if with_get {
            let sub = json!({"jsonrpc":"2.0","id":"sub","method":"resources/subscribe",
                             "params":{"uri":"test://static"}});
            self.check(server, "subscribe", &url, &sid, &sub, Expect::Result)
                .await?;
        }
        let calls = self.rng.range(3, 10);
        for i in 0..calls {
            if Instant::now() >= deadline {
                break;
            }
            self.think().await;
            let id = format!("{round}-{i}");
            let (op, msg, expect) = self.pick(&id, with_get);
            self.check(server, op, &url, &sid, &msg, expect).await?;
        }
        if let Some(get) = get {
            get.abort();
        }
        if self.rng.below(100) < self.drop_percent {
            c.sessions_abandoned.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
        let resp = self
            .http
            .delete(&url)
            .header("mcp-session-id", &sid)
            .header("mcp-protocol-version", VERSION)
            .send()
            .await?;
        if resp.status() == 200 {
            c.sessions_deleted.fetch_add(1, Ordering::Relaxed);
        } else {
            c.error(format!("{server} DELETE: HTTP {}", resp.status()), "");
        }
        Ok(())
    }

    /// A random request for this session.
    fn pick(&mut self, id: &str, with_get: bool) -> (&'static str, Value, Expect) {
        let call = |name: &str, args: Value| {
            json!({"jsonrpc":"2.0","id":id,"method":"tools/call",
                   "params":{"name":name,"arguments":args}})
        };
        let roll = self.rng.below(100);
        match roll {
            0..30 => {
                let text = format!("soak {} {id}", self.n);
                (
                    "echo",
                    call("echo", json!({ "text": text })),
                    Expect::Text(text),
                )
            }
            30..45 => {
                let (a, b) = (self.rng.below(1000), self.rng.below(1000));
                (
                    "add",
                    call("add", json!({"a": a, "b": b})),
                    Expect::Text((a + b).to_string()),
                )
            }
            45..70 => {
                let count = self.rng.range(1, 8);
                let tag = format!("w{}-{id}", self.n);
                let msg = json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{
                    "name":"notify","arguments":{"tag": tag, "count": count},
                    "_meta":{"progressToken": format!("p-{id}")}}});
                let expect = Expect::Notify {
                    tag,
                    count,
                    get_open: with_get,
                };
                ("notify", msg, expect)
            }
            70..80 => (
                "tools/list",
                json!({"jsonrpc":"2.0","id":id,"method":"tools/list"}),
                Expect::Result,
            ),
            80..85 => (
                "ping",
                json!({"jsonrpc":"2.0","id":id,"method":"ping"}),
                Expect::Result,
            ),
            85..90 => {
                let ms = self.rng.range(5, 30);
                (
                    "slow",
                    call("slow", json!({ "ms": ms })),
                    Expect::Text(format!("slept {ms}")),
                )
            }
            90..95 => (
                "resources/read",
                json!({"jsonrpc":"2.0","id":id,"method":"resources/read",
                       "params":{"uri":"test://static"}}),
                Expect::Result,
            ),
            _ if with_get => (
                "touch",
                call("touch", json!({"uri": "test://static"})),
                Expect::Result,
            ),
            _ => (
                "echo",
                call("echo", json!({"text": "x"})),
                Expect::Text("x".into()),
            ),
        }
    }

    async fn check(
        &mut self,
        server: &str,
        op: &str,
        url: &str,
        sid: &str,
        msg: &Value,
        expect: Expect,
    ) -> Result<()> {
        let c = &self.counters;
        let a = match post(&self.http, url, Some(sid), msg).await {
            Ok(a) => a,
            Err(e) => {
                c.calls_failed.fetch_add(1, Ordering::Relaxed);
                c.error(format!("{server} {op}: transport error"), format!("{e:#}"));
                return Ok(());
            }
        };
        let last = a.messages.last().cloned().unwrap_or(Value::Null);
        let method_count = |name: &str| {
            a.messages
                .iter()
                .filter(|m| m.get("method").and_then(Value::as_str) == Some(name))
                .count() as u64
        };
        let (progress, logs) = (
            method_count("notifications/progress"),
            method_count("notifications/message"),
        );
        let notes = a
            .messages
            .iter()
            .filter(|m| m.get("method").is_some())
            .count() as u64;
        c.notifications.fetch_add(notes, Ordering::Relaxed);
        let text = last
            .pointer("/result/content/0/text")
            .and_then(Value::as_str);
        let good = a.status == 200
            && last.get("result").is_some()
            && last.pointer("/result/isError") != Some(&Value::Bool(true))
            && match &expect {
                Expect::Result => true,
                Expect::Text(t) => text == Some(t.as_str()),
                Expect::Notify {
                    tag,
                    count,
                    get_open,
                } => {
                    text == Some(format!("{tag}:{count}").as_str())
                        && progress == *count
                        && (logs == *count || (*get_open && logs <= *count))
                }
            };
        if good {
            c.calls_ok.fetch_add(1, Ordering::Relaxed);
        } else {
            c.calls_failed.fetch_add(1, Ordering::Relaxed);
            let what = match last.pointer("/error/code") {
                Some(code) => format!("{server} {op}: HTTP {} JSON-RPC {code}", a.status),
                None => format!("{server} {op}: HTTP {} wrong answer", a.status),
            };
            let detail = format!("{} messages; last: {last}", a.messages.len());
            c.error(what, detail.chars().take(300).collect::<String>());
        }
        Ok(())
    }

    /// Opens the session's GET stream and counts its events until aborted or ended.
    fn open_get(&self, url: &str, sid: &str) -> tokio::task::JoinHandle<()> {
        let req = self
            .stream_http
            .get(url)
            .header("accept", "text/event-stream")
            .header("mcp-session-id", sid)
            .header("mcp-protocol-version", VERSION);
        let c = Arc::clone(&self.counters);
        tokio::spawn(async move {
            let resp = match req.send().await {
                Ok(r) if r.status() == 200 => r,
                Ok(r) => {
                    c.error(format!("GET: HTTP {}", r.status()), "");
                    return;
                }
                Err(e) => {
                    c.error("GET: transport error".into(), format!("{e:#}"));
                    return;
                }
            };
            c.get_streams.fetch_add(1, Ordering::Relaxed);
            let mut body = resp.bytes_stream();
            while let Some(Ok(chunk)) = body.next().await {
                let events = chunk.windows(6).filter(|w| w == b"data: ").count() as u64;
                c.get_events.fetch_add(events, Ordering::Relaxed);
            }
        })
    }
}

// ---------------------------------------------------------------------------------------
// the gateway side

async fn metric(http: &reqwest::Client, base: &str, name: &str) -> Option<f64> {
    let text = http
        .get(format!("{base}/metrics"))
        .send()
        .await
        .ok()?
        .text()
        .await
        .ok()?;
    Some(
        text.lines()
            .filter_map(|l| l.rsplit_once(' '))
            .find(|(k, _)| *k == name)
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(0.0),
    )
}

async fn metrics_text(http: &reqwest::Client, base: &str) -> String {
    match http.get(format!("{base}/metrics")).send().await {
        Ok(r) => r.text().await.unwrap_or_default(),
        Err(_) => String::new(),
    }
}

/// One RSS sample: seconds since the load started, KiB, and sessions open then.
#[derive(Clone, Copy)]
struct Sample {
    t: f64,
    rss: u64,
    sessions: f64,
}

fn median(mut v: Vec<u64>) -> u64 {
    if v.is_empty() {
        return 0;
    }
    v.sort_unstable();
    v[v.len() / 2]
}

/// Median RSS of the samples taken between `from` and `to` (fractions of the load).
fn window(samples: &[Sample], secs: f64, from: f64, to: f64) -> u64 {
    median(
        samples
            .iter()
            .filter(|s| s.t >= from * secs && s.t <= to * secs)
            .map(|s| s.rss)
            .collect(),
    )
}

/// Least-squares slope of RSS over time, in KiB per minute.
fn slope_kib_per_min(samples: &[Sample]) -> f64 {
    let n = samples.len() as f64;
    if n < 2.0 {
        return 0.0;
    }
    let mt = samples.iter().map(|s| s.t).sum::<f64>() / n;
    let mr = samples.iter().map(|s| s.rss as f64).sum::<f64>() / n;
    let num: f64 = samples
        .iter()
        .map(|s| (s.t - mt) * (s.rss as f64 - mr))
        .sum();
    let den: f64 = samples.iter().map(|s| (s.t - mt).powi(2)).sum();
    if den == 0.0 { 0.0 } else { num / den * 60.0 }
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
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
