//! Child processes: locate the release binaries, start the upstreams and the
//! gateway, wait for their ready lines, and stop them on every path.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// How long a child gets to print its ready line.
const READY_TIMEOUT: Duration = Duration::from_secs(20);
/// How long a child gets to exit after SIGTERM before SIGKILL.
const TERM_GRACE: Duration = Duration::from_secs(3);

/// A running child process. Dropping it sends SIGTERM, waits up to
/// [`TERM_GRACE`], then sends SIGKILL and reaps it.
pub(crate) struct Proc {
    name: String,
    child: Child,
    /// Held open so a child that exits on stdin EOF dies with us.
    _stdin: Option<ChildStdin>,
    /// Where its stderr goes (when not used for the ready line).
    log: Option<PathBuf>,
}

impl Proc {
    /// The process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// A short name for messages.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.stop();
        if let Some(log) = &self.log {
            // Only needed while the child runs (for a failed start's error message).
            let _ = std::fs::remove_file(log);
        }
    }
}

impl Proc {
    fn stop(&mut self) {
        if matches!(self.child.try_wait(), Ok(Some(_))) {
            return;
        }
        if let Ok(raw) = i32::try_from(self.child.id()) {
            // Best effort: the process may have exited since try_wait.
            let _ = kill(Pid::from_raw(raw), Signal::SIGTERM);
        }
        let deadline = Instant::now() + TERM_GRACE;
        while Instant::now() < deadline {
            match self.child.try_wait() {
                Ok(Some(_)) => return,
                Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                Err(_) => break,
            }
        }
        eprintln!(
            "mcpgate-bench: {} ignored SIGTERM; sending SIGKILL",
            self.name
        );
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Which output stream carries a child's ready line.
#[derive(Clone, Copy)]
enum ReadyOn {
    Stdout,
    Stderr,
}

/// Where the binaries are: next to this executable, unless overridden.
pub(crate) fn bin_dir(flag: Option<PathBuf>) -> Result<PathBuf> {
    let dir = match flag {
        Some(d) => d,
        None => std::env::current_exe()
            .context("cannot find my own executable")?
            .parent()
            .ok_or_else(|| anyhow!("my executable has no parent directory"))?
            .to_path_buf(),
    };
    for bin in ["mcpgate", "mcpgate-testkit"] {
        if !dir.join(bin).is_file() {
            bail!(
                "{} not found in {}; build the binaries first: \
                 cargo build --release -p mcpgate -p mcpgate-testkit -p mcpgate-bench",
                bin,
                dir.display()
            );
        }
    }
    Ok(dir)
}

/// Starts `mcpgate-testkit http` and returns it with its MCP URL.
pub(crate) fn start_testkit(bins: &Path, extra: &[&str]) -> Result<(Proc, String)> {
    let mut cmd = Command::new(bins.join("mcpgate-testkit"));
    cmd.args(["http", "--listen", "127.0.0.1:0"]).args(extra);
    let (proc, line) = spawn(cmd, "testkit", ReadyOn::Stdout, "LISTENING ")?;
    let url = line.trim_start_matches("LISTENING ").trim().to_owned();
    Ok((proc, url))
}

/// Starts the gateway in front of `upstream_url` and returns it with its MCP URL.
/// `env` is extra environment for diagnostic runs (e.g. `TOKIO_WORKER_THREADS`); `toml`,
/// when given, is appended to a config file naming the upstream (e.g. `[session]
/// seal_keys = …` or `[telemetry] …`, to measure what they cost).
pub(crate) fn start_gateway(
    bins: &Path,
    upstream_url: &str,
    name: &str,
    (env, toml): (&[(String, String)], Option<&str>),
) -> Result<(Proc, String)> {
    let mut cmd = Command::new(bins.join("mcpgate"));
    cmd.args(["--listen", "127.0.0.1:0"]);
    match toml {
        None => {
            cmd.args(["--upstream", upstream_url]);
        }
        Some(extra) => {
            let path = std::env::temp_dir()
                .join(format!("mcpgate-bench-{}-{name}.toml", std::process::id()));
            std::fs::write(
                &path,
                format!(
                    "[[server]]\nname = \"default\"\ntransport = \"streamable-http\"\nurl = \"{upstream_url}\"\n{extra}\n"
                ),
            )?;
            cmd.arg("--config").arg(path);
        }
    }
    cmd.envs(env.iter().map(|(k, v)| (k, v)));
    let (proc, line) = spawn(cmd, name, ReadyOn::Stdout, "mcpgate listening on ")?;
    let base = line.trim_start_matches("mcpgate listening on ").trim();
    Ok((proc, format!("{}/mcp", base.trim_end_matches('/'))))
}

/// Starts the gateway with the whole configuration `toml`; returns it with its base URL.
pub(crate) fn start_gateway_config(
    bins: &Path,
    toml: &str,
    name: &str,
    env: &[(String, String)],
) -> Result<(Proc, String)> {
    let path =
        std::env::temp_dir().join(format!("mcpgate-bench-{}-{name}.toml", std::process::id()));
    std::fs::write(&path, toml)?;
    let mut cmd = Command::new(bins.join("mcpgate"));
    cmd.args(["--listen", "127.0.0.1:0", "--config"]).arg(path);
    cmd.envs(env.iter().map(|(k, v)| (k, v)));
    let (proc, line) = spawn(cmd, name, ReadyOn::Stdout, "mcpgate listening on ")?;
    let base = line.trim_start_matches("mcpgate listening on ").trim();
    Ok((proc, base.trim_end_matches('/').to_owned()))
}

/// Starts the official everything server (Streamable HTTP) with node.
pub(crate) fn start_everything(script: &Path) -> Result<(Proc, String)> {
    let mut cmd = Command::new("node");
    cmd.arg(script)
        .arg("streamableHttp")
        .env("PORT", "0")
        .env("EVERYTHING_EXIT_ON_STDIN_EOF", "1");
    let (proc, line) = spawn(
        cmd,
        "everything",
        ReadyOn::Stderr,
        "MCPGATE_EVERYTHING_READY",
    )?;
    let url = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("url="))
        .ok_or_else(|| anyhow!("everything server ready line has no url=: {line}"))?;
    Ok((proc, url.to_owned()))
}

/// `node tests/modern/ts_server.mjs http --port 0` (TypeScript SDK 2.4, both eras).
pub(crate) fn start_ts_modern(script: &Path) -> Result<(Proc, String)> {
    let mut cmd = Command::new("node");
    cmd.arg(script).args(["http", "--port", "0"]);
    let (proc, line) = spawn(cmd, "ts-modern", ReadyOn::Stderr, "MODERN_SERVER_READY")?;
    let url = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("url="))
        .ok_or_else(|| anyhow!("TypeScript server ready line has no url=: {line}"))?;
    Ok((proc, url.to_owned()))
}

/// Spawns `cmd` with its stdout and stderr going to `log` (kept: the caller owns it); the
/// caller decides when it is ready.
pub(crate) fn spawn_quiet(mut cmd: Command, name: &str, log: &Path) -> Result<Proc> {
    let file =
        File::create(log).with_context(|| format!("cannot create log file {}", log.display()))?;
    let err = file.try_clone()?;
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::from(file))
        .stderr(Stdio::from(err));
    let program = cmd.get_program().to_string_lossy().into_owned();
    let mut child = cmd
        .spawn()
        .with_context(|| format!("cannot start {name} ({program})"))?;
    Ok(Proc {
        name: name.to_owned(),
        _stdin: child.stdin.take(),
        child,
        log: None,
    })
}

/// Spawns `cmd`, waits for a line starting with `prefix` on `ready_on`, and keeps
/// draining that stream afterwards so the child never blocks on a full pipe.
fn spawn(mut cmd: Command, name: &str, ready_on: ReadyOn, prefix: &str) -> Result<(Proc, String)> {
    let log =
        std::env::temp_dir().join(format!("mcpgate-bench-{}-{}.log", std::process::id(), name));
    cmd.stdin(Stdio::piped());
    match ready_on {
        ReadyOn::Stdout => {
            let file = File::create(&log)
                .with_context(|| format!("cannot create log file {}", log.display()))?;
            cmd.stdout(Stdio::piped()).stderr(Stdio::from(file));
        }
        ReadyOn::Stderr => {
            cmd.stdout(Stdio::null()).stderr(Stdio::piped());
        }
    }
    let program = cmd.get_program().to_string_lossy().into_owned();
    let mut child = cmd
        .spawn()
        .with_context(|| format!("cannot start {name} ({program})"))?;
    let stream: Box<dyn Read + Send> = match ready_on {
        ReadyOn::Stdout => match child.stdout.take() {
            Some(s) => Box::new(s),
            None => bail!("{name}: no stdout pipe"),
        },
        ReadyOn::Stderr => match child.stderr.take() {
            Some(s) => Box::new(s),
            None => bail!("{name}: no stderr pipe"),
        },
    };
    let proc = Proc {
        name: name.to_owned(),
        _stdin: child.stdin.take(),
        child,
        log: matches!(ready_on, ReadyOn::Stdout).then_some(log),
    };
    let (tx, rx) = mpsc::channel::<String>();
    let prefix_owned = prefix.to_owned();
    std::thread::Builder::new()
        .name(format!("drain-{name}"))
        .spawn(move || drain(stream, &prefix_owned, tx))
        .context("cannot start a drain thread")?;
    match rx.recv_timeout(READY_TIMEOUT) {
        Ok(line) => Ok((proc, line)),
        Err(e) => {
            let why = match e {
                mpsc::RecvTimeoutError::Timeout => "did not become ready in time",
                mpsc::RecvTimeoutError::Disconnected => "exited before becoming ready",
            };
            let tail = proc.log.as_deref().map(log_tail).unwrap_or_default();
            bail!("{name} ({program}) {why}{tail}")
        }
    }
}

/// Reads lines until EOF; the first one starting with `prefix` goes to `tx`.
fn drain(stream: Box<dyn Read + Send>, prefix: &str, tx: mpsc::Sender<String>) {
    let mut reader = BufReader::new(stream);
    let mut tx = Some(tx);
    let mut line = String::new();
    loop {
        line.clear();
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                if line.starts_with(prefix)
                    && let Some(tx) = tx.take()
                {
                    let _ = tx.send(line.trim_end().to_owned());
                }
            }
        }
    }
}

/// The last lines of a child's log file, for error messages.
fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let tail = lines[lines.len().saturating_sub(10)..].join("\n  ");
    if tail.is_empty() {
        format!(" (log {} is empty)", path.display())
    } else {
        format!("; last log lines ({}):\n  {tail}", path.display())
    }
}
