//! Running the real `mcpgate` binary.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// Path of a workspace binary (`mcpgate`, `mcpgate-testkit`), next to the test binary's
/// `deps/` folder.
pub fn bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let dir = exe.parent().and_then(|d| d.parent()).expect("target dir");
    let p = dir.join(name);
    assert!(
        p.exists(),
        "{} not found: build the binaries first (cargo build --workspace --bins)",
        p.display()
    );
    p
}

/// A running gateway. Dropping it sends SIGTERM and reaps it.
#[derive(Debug)]
pub struct Gateway {
    child: Option<Child>,
    /// Base URL, e.g. `http://127.0.0.1:40123` (`https://` with a TLS listener).
    pub base: String,
    /// The lines the gateway printed on stdout before the test went on (the listening
    /// line, the admin line, …).
    pub stdout: Vec<String>,
    /// The config file it runs with (tests rewrite it before a SIGHUP).
    pub config: PathBuf,
    /// The HTTP client `metric()` uses (one that trusts the test CA for HTTPS).
    http: reqwest::Client,
    log: PathBuf,
    _dir: TempDir,
}

/// How to start a gateway beyond its config file.
#[derive(Debug, Default)]
pub struct Launch {
    /// Extra environment variables.
    pub env: Vec<(String, String)>,
    /// Lines to read from stdout before returning (at least 1: the listening line).
    pub stdout_lines: usize,
    /// The client for the gateway's own endpoints (default: plain reqwest).
    pub http: Option<reqwest::Client>,
    /// A subcommand before the options (`inspector`: `mcpgate inspector --config …`).
    pub subcommand: Option<String>,
    /// More arguments after `--config FILE --listen 127.0.0.1:0`.
    pub args: Vec<String>,
    /// A cgroup v2 directory the gateway starts in (as systemd starts a service in its
    /// own cgroup).
    pub cgroup: Option<PathBuf>,
}

#[derive(Debug)]
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl Gateway {
    /// Starts `mcpgate` with a config file made from `toml` (which must not set
    /// `listen.addr`; the gateway binds an ephemeral loopback port).
    pub fn start(toml: &str) -> Gateway {
        Gateway::launch(toml, Launch::default())
    }

    /// Like [`Gateway::start`], with environment, more stdout lines, another client, a
    /// subcommand or more arguments.
    pub fn launch(toml: &str, how: Launch) -> Gateway {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("mcpgate-test-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let cfg = dir.join("mcpgate.toml");
        std::fs::write(&cfg, toml).unwrap();
        let log = dir.join("stderr.log");
        let mut command = match &how.cgroup {
            None => Command::new(bin("mcpgate")),
            Some(cg) => {
                let mut c = Command::new("sh");
                c.arg("-c")
                    .arg("echo $$ > \"$0/cgroup.procs\" && exec \"$@\"")
                    .arg(cg)
                    .arg(bin("mcpgate"));
                c
            }
        };
        let mut child = command
            .args(how.subcommand.as_slice())
            .arg("--config")
            .arg(&cfg)
            .arg("--listen")
            .arg("127.0.0.1:0")
            .args(&how.args)
            .env(
                "RUST_LOG",
                std::env::var("MCPGATE_TEST_LOG").unwrap_or_else(|_| "info".into()),
            )
            .envs(how.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("spawn mcpgate");
        let stdout = child.stdout.take().unwrap();
        let mut reader = BufReader::new(stdout);
        let mut lines = Vec::new();
        for _ in 0..how.stdout_lines.max(1) {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            lines.push(line.trim().to_owned());
        }
        // Keep the pipe open (a closed stdout would fail the gateway's later prints).
        std::thread::spawn(move || {
            let mut sink = String::new();
            while reader.read_line(&mut sink).is_ok_and(|n| n > 0) {
                sink.clear();
            }
        });
        let line = lines[0].clone();
        let base = ["mcpgate listening on ", "mcpgate inspector listening on "]
            .iter()
            .find_map(|prefix| line.strip_prefix(prefix))
            .unwrap_or_else(|| {
                panic!(
                    "unexpected first line {line:?}; log:\n{}",
                    std::fs::read_to_string(&log).unwrap_or_default()
                )
            })
            .to_owned();
        Gateway {
            child: Some(child),
            base,
            stdout: lines,
            config: cfg,
            http: how.http.unwrap_or_default(),
            log,
            _dir: TempDir(dir),
        }
    }

    /// Sends SIGHUP (reload).
    pub fn hangup(&self) {
        if let Some(c) = &self.child {
            let _ = kill(Pid::from_raw(c.id() as i32), Signal::SIGHUP);
        }
    }

    /// Rewrites the config file with `toml`, sends SIGHUP, and waits (10 s at most) for one
    /// more log line containing `outcome` (`configuration reloaded`, `… refused`) than
    /// there was before; panics with the log otherwise.
    pub async fn reload_with(&self, toml: &str, outcome: &str) {
        let before = self.log().matches(outcome).count();
        std::fs::write(&self.config, toml).unwrap();
        self.hangup();
        let ok = wait_until(Duration::from_secs(10), || async {
            self.log().matches(outcome).count() > before
        })
        .await;
        assert!(ok, "no new {outcome:?} in the log:\n{}", self.log());
    }

    /// A gateway in front of one Streamable HTTP upstream, with extra config appended.
    pub fn http(upstream: &str, extra: &str) -> Gateway {
        Gateway::start(&format!(
            "[[server]]\nname = \"up\"\ntransport = \"streamable-http\"\nurl = \"{upstream}\"\n{extra}"
        ))
    }

    /// A gateway in front of a stdio `mcpgate-testkit` (with `args`), extra config appended.
    pub fn stdio_testkit(args: &[&str], extra: &str) -> Gateway {
        let mut cmd = vec![
            format!("{:?}", bin("mcpgate-testkit").display().to_string()),
            "\"stdio\"".into(),
        ];
        cmd.extend(args.iter().map(|a| format!("{a:?}")));
        Gateway::start(&format!(
            "[[server]]\nname = \"up\"\ntransport = \"stdio\"\ncommand = [{}]\n{extra}",
            cmd.join(", ")
        ))
    }

    /// The MCP endpoint URL.
    pub fn url(&self) -> String {
        format!("{}/mcp", self.base)
    }

    /// The gateway's pid.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map(Child::id).unwrap_or(0)
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| c.try_wait().ok().flatten().is_none())
    }

    /// The gateway's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The whole `/metrics` text.
    pub async fn metrics_text(&self) -> String {
        self.http
            .get(format!("{}/metrics", self.base))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }

    /// One sample's value from `/metrics`: `name` is the sample as printed, labels
    /// included (`mcpgate_sessions_closed_total{reason="idle"}`). Panics when there is no
    /// such sample, naming it and listing the samples of that name that are there: a
    /// renamed metric or label must not read as 0. A labelled counter appears only with
    /// its first count; read one that may not have counted yet with
    /// [`Gateway::metric_or_zero`].
    pub async fn metric(&self, name: &str) -> f64 {
        let text = self.metrics_text().await;
        sample(&text, name).unwrap_or_else(|| {
            let family = name.split('{').next().unwrap_or(name);
            let near: Vec<&str> = text
                .lines()
                .filter(|l| !l.starts_with('#') && l.starts_with(family))
                .collect();
            panic!(
                "no sample {name} in /metrics (renamed, or a labelled counter that has not \
                 counted yet: use metric_or_zero); samples named {family}…: {near:?}"
            )
        })
    }

    /// As [`Gateway::metric`], 0 while the sample is absent: for a labelled counter, which
    /// appears with its first count (a sample whose label value has not counted yet is not
    /// printed). A 0 read this way cannot tell "not counted" from "renamed", so a test
    /// that relies on it also shows the same sample counting.
    pub async fn metric_or_zero(&self, name: &str) -> f64 {
        sample(&self.metrics_text().await, name).unwrap_or(0.0)
    }

    /// Waits up to `limit` until no session is active; panics with the log otherwise.
    pub async fn assert_drained(&self, limit: Duration) {
        let drained = wait_until(limit, || async {
            self.metric("mcpgate_sessions_active").await == 0.0
        })
        .await;
        assert!(
            drained,
            "mcpgate_sessions_active stays {}; log:\n{}",
            self.metric("mcpgate_sessions_active").await,
            self.log()
        );
    }

    /// Asserts that exactly `n` sessions were opened and all were ended by client DELETEs.
    pub async fn assert_all_closed_by_client(&self, n: f64) {
        self.assert_drained(Duration::from_secs(5)).await;
        assert_eq!(self.metric("mcpgate_sessions_opened_total").await, n);
        let closed = self
            .metric("mcpgate_sessions_closed_total{reason=\"client_delete\"}")
            .await;
        assert_eq!(
            closed,
            n,
            "sessions must end by the client's DELETE; log:\n{}",
            self.log()
        );
    }

    /// Sends SIGTERM and waits for the exit (bounded); returns the exit code.
    pub fn stop(&mut self) -> Option<i32> {
        let mut child = self.child.take()?;
        let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM);
        let until = Instant::now() + Duration::from_secs(20);
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

impl Drop for Gateway {
    /// Sends SIGTERM and reaps the process from another thread: blocking here would stall
    /// a single-threaded test runtime that also runs the gateway's (in-process) upstream,
    /// which the gateway is then busy telling about its shutdown.
    /// A test that failed with the gateway running gets the tail of the gateway's log on
    /// stderr (the temporary directory holding it goes with the gateway).
    fn drop(&mut self) {
        if std::thread::panicking() {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            let lines: Vec<&str> = log.lines().collect();
            let tail = &lines[lines.len().saturating_sub(60)..];
            eprintln!(
                "--- mcpgate log (last {} lines) ---\n{}",
                tail.len(),
                tail.join("\n")
            );
        }
        if let Some(mut child) = self.child.take() {
            let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM);
            std::thread::spawn(move || {
                let until = Instant::now() + Duration::from_secs(30);
                while Instant::now() < until {
                    if let Ok(Some(_)) = child.try_wait() {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
                let _ = child.kill();
                let _ = child.wait();
            });
        }
    }
}

/// The value of sample `name` (labels included, as printed) in a Prometheus text.
fn sample(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .filter_map(|l| l.rsplit_once(' '))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| {
            v.parse()
                .unwrap_or_else(|e| panic!("sample {name}: {v:?} is not a number: {e}"))
        })
}

/// Live child processes of `pid` (from /proc), other than the gateway's own reaper
/// (`mcpgate reaper`, which kills the stdio children's groups if the gateway dies).
pub fn children_of(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in dir.flatten() {
        let Ok(p) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else {
            continue;
        };
        // Fields after the parenthesised command: state ppid …
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
            continue;
        };
        let mut f = rest.split_whitespace();
        let state = f.next().unwrap_or("");
        let ppid: u32 = f.next().and_then(|x| x.parse().ok()).unwrap_or(0);
        if ppid == pid && state != "Z" && !is_reaper(p) {
            out.push(p);
        }
    }
    out
}

/// Whether process `p` is a gateway's reaper (its command line is `… reaper`).
fn is_reaper(p: u32) -> bool {
    std::fs::read(format!("/proc/{p}/cmdline"))
        .is_ok_and(|c| c.split(|b| *b == 0).filter(|a| !a.is_empty()).nth(1) == Some(b"reaper"))
}

/// Polls `f` every 20 ms until it is true or `limit` passes; returns the last value.
pub async fn wait_until<F, Fut>(limit: Duration, mut f: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let until = Instant::now() + limit;
    loop {
        if f().await {
            return true;
        }
        if Instant::now() > until {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Runs `mcpgate --check-config` on a file holding `toml`: its exit code and what it
/// printed (stdout, then stderr).
pub fn check_config(toml: &str) -> (i32, String) {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = std::env::temp_dir().join(format!("mcpgate-check-{}-{n}.toml", std::process::id()));
    std::fs::write(&path, toml).unwrap();
    let out = Command::new(bin("mcpgate"))
        .arg("--check-config")
        .arg(&path)
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&path);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}
