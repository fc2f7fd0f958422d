//! stdio upstream: one child process per client session.
//!
//! A child has one pipe each way; request ids are rewritten and replies routed by
//! [`Mux`] (see `mux.rs`), always within the one session that owns the child.
//!
//! Teardown: close stdin, wait, SIGTERM the process group, wait, SIGKILL, reap.
//!
//! A child that ends on its own is described by how it ended and what it said last: its
//! exit status or signal and its last stderr lines go into the error of every request in
//! flight and into one warning (a server that exits at start with
//! `Error: API_KEY environment variable is required` says so to the client).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use mcpgate_jsonrpc::Message;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::AsyncWriteExt;
use tokio::process::{Child, ChildStdin};
use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::codec::FramedRead;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use mcpgate_child::Record;

use crate::children::{Held, Ready};
use crate::error::{Exit, SpawnError, Teardown, UpstreamError};
use crate::lines::{Line, LineCodec};
use crate::mux::Mux;
use crate::replies::Replies;
use crate::sink::{EventSink, Opening};

/// A dedicated child process.
pub struct StdioUpstream {
    label: Arc<str>,
    pid: Option<u32>,
    writer: mpsc::Sender<Bytes>,
    mux: Mux,
    cancel: CancellationToken,
    ended: Mutex<Option<oneshot::Receiver<Teardown>>>,
    grace: Duration,
    report: Arc<ExitReport>,
}

/// Stderr lines kept per child for error messages.
const STDERR_TAIL_LINES: usize = 5;
/// Longest stderr line kept (longer ones are cut).
const STDERR_LINE_CHARS: usize = 300;
/// How long a failure waits for the child's exit status and last stderr lines.
const REPORT_WAIT: Duration = Duration::from_millis(1000);

/// How a child ended: its status once reaped, and its last stderr lines.
#[derive(Debug)]
struct ExitReport {
    tail: Mutex<VecDeque<String>>,
    /// "exited with status 1", "was killed by signal 9 (SIGKILL)".
    status: watch::Sender<Option<String>>,
    /// Set when stderr reached its end (everything the child wrote has been read).
    stderr_done: watch::Sender<bool>,
    /// The bound the gateway ended it for, if it did.
    limit: Mutex<Option<&'static str>>,
}

impl ExitReport {
    fn new() -> Self {
        ExitReport {
            tail: Mutex::new(VecDeque::new()),
            status: watch::channel(None).0,
            stderr_done: watch::channel(false).0,
            limit: Mutex::new(None),
        }
    }

    fn stderr_line(&self, line: &str) {
        if let Ok(mut t) = self.tail.lock() {
            if t.len() >= STDERR_TAIL_LINES {
                t.pop_front();
            }
            let mut l: String = line.trim_end().chars().take(STDERR_LINE_CHARS).collect();
            if l.len() < line.trim_end().len() {
                l.push('…');
            }
            t.push_back(l);
        }
    }

    /// How the child ended and its last stderr lines, waiting (bounded) for the status
    /// and for stderr to be read to its end; `otherwise` describes a child that is still
    /// running.
    async fn describe(&self, otherwise: &str) -> Exit {
        let mut status = self.status.subscribe();
        let mut done = self.stderr_done.subscribe();
        let _ = tokio::time::timeout(REPORT_WAIT, async {
            let _ = status.wait_for(Option::is_some).await;
            let _ = done.wait_for(|d| *d).await;
        })
        .await;
        let how = self
            .status
            .borrow()
            .clone()
            .unwrap_or_else(|| otherwise.to_owned());
        let stderr: Vec<String> = self
            .tail
            .lock()
            .map(|t| t.iter().filter(|l| !l.trim().is_empty()).cloned().collect())
            .unwrap_or_default();
        let limit = self.limit.lock().ok().and_then(|l| *l);
        Exit { how, stderr, limit }
    }
}

/// "exited with status 1" or "was killed by signal 9 (SIGKILL)".
fn status_text(status: &std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => format!("exited with status {c}"),
        (None, Some(sig)) => match Signal::try_from(sig) {
            Ok(s) => format!("was killed by signal {sig} ({})", s.as_str()),
            Err(_) => format!("was killed by signal {sig}"),
        },
        (None, None) => "exited".to_owned(),
    }
}

impl std::fmt::Debug for StdioUpstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StdioUpstream")
            .field("label", &self.label)
            .field("pid", &self.pid)
            .finish()
    }
}

impl StdioUpstream {
    /// Takes over a started child: its pipes, its supervision, the session's sink.
    pub(crate) fn start(
        ready: Ready,
        o: Opening,
        max_line: usize,
        grace: Duration,
    ) -> Result<Self, UpstreamError> {
        let Ready { mut child, held } = ready;
        let pid = child.id();
        info!(session = %o.label, pid, warm = held.was_warm(), "stdio upstream attached to the session");
        let report = Arc::new(ExitReport::new());
        let (stdin, stdout, stderr) =
            match (child.stdin.take(), child.stdout.take(), child.stderr.take()) {
                (Some(i), Some(out), Some(e)) => (i, out, e),
                _ => {
                    // Unreachable with Stdio::piped(); handled rather than assumed.
                    let (tx, _) = oneshot::channel();
                    let reaper = Supervisor {
                        grace: Duration::ZERO,
                        held,
                        done: tx,
                        report,
                    };
                    o.tasks
                        .spawn(reaper.run(child, o.cancel.clone(), o.label.clone()));
                    o.cancel.cancel();
                    return Err(SpawnError::NoPipes.into());
                }
            };
        let mux = Mux::default();
        let (wtx, wrx) = mpsc::channel::<Bytes>(64);
        let (label, cancel, tasks) = (o.label, o.cancel, o.tasks);
        tasks.spawn(write_loop(stdin, wrx, cancel.clone(), label.clone()));
        tasks.spawn(read_loop(
            FramedRead::new(stdout, LineCodec::new(max_line)),
            (mux.clone(), o.sink),
            cancel.clone(),
            label.clone(),
            (report.clone(), held.record.clone()),
        ));
        tasks.spawn(stderr_loop(
            stderr,
            cancel.clone(),
            label.clone(),
            report.clone(),
        ));
        let (done_tx, done_rx) = oneshot::channel();
        let supervisor = Supervisor {
            grace,
            held,
            done: done_tx,
            report: report.clone(),
        };
        tasks.spawn(supervisor.run(child, cancel.clone(), label.clone()));
        Ok(StdioUpstream {
            label,
            pid,
            writer: wtx,
            mux,
            cancel,
            ended: Mutex::new(Some(done_rx)),
            grace,
            report,
        })
    }

    pub(crate) fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// The child's last non-empty stderr lines, oldest first.
    pub(crate) fn stderr_tail(&self) -> Vec<String> {
        self.report
            .tail
            .lock()
            .map(|t| t.iter().filter(|l| !l.trim().is_empty()).cloned().collect())
            .unwrap_or_default()
    }

    pub(crate) async fn request(&self, msg: Message) -> Result<Replies, UpstreamError> {
        let (out, replies) = self.mux.register(&msg)?;
        if self.writer.send(out.into_raw()).await.is_err() {
            return Err(self.gone().await);
        }
        Ok(replies)
    }

    pub(crate) async fn send(&self, msg: Message) -> Result<(), UpstreamError> {
        let Some(msg) = self.mux.outgoing(msg, &self.label)? else {
            return Ok(());
        };
        if self.writer.send(msg.into_raw()).await.is_err() {
            return Err(self.gone().await);
        }
        Ok(())
    }

    /// The error for a child whose stdin is closed: how it ended, if it did.
    async fn gone(&self) -> UpstreamError {
        UpstreamError::Exited(self.report.describe("closed its stdin").await)
    }

    pub(crate) async fn close(&self) -> Teardown {
        self.cancel.cancel();
        let rx = self.ended.lock().ok().and_then(|mut g| g.take());
        let Some(rx) = rx else {
            return Teardown::AlreadyEnded;
        };
        // The supervisor bounds each step itself; this outer bound only guards against a
        // supervisor that cannot run.
        match tokio::time::timeout(self.grace * 3 + Duration::from_secs(2), rx).await {
            Ok(Ok(t)) => t,
            _ => Teardown::Killed,
        }
    }
}

async fn write_loop(
    stdin: ChildStdin,
    mut rx: mpsc::Receiver<Bytes>,
    cancel: CancellationToken,
    label: Arc<str>,
) {
    let mut stdin = tokio::io::BufWriter::new(stdin);
    loop {
        let msg = tokio::select! {
            biased;
            () = cancel.cancelled() => break,
            m = rx.recv() => match m { Some(m) => m, None => break },
        };
        // JSON allows raw line breaks only as whitespace between tokens, so they can be
        // blanked without changing the message; stdio framing forbids them.
        let line: Bytes = if msg.iter().any(|b| *b == b'\n' || *b == b'\r') {
            msg.iter()
                .map(|b| if *b == b'\n' || *b == b'\r' { b' ' } else { *b })
                .collect::<Vec<u8>>()
                .into()
        } else {
            msg
        };
        let res = async {
            stdin.write_all(&line).await?;
            stdin.write_all(b"\n").await?;
            stdin.flush().await
        }
        .await;
        if let Err(e) = res {
            debug!(session = %label, error = %e, "stdio upstream stdin closed");
            break;
        }
    }
    // Dropping stdin closes the pipe: the child sees EOF, the polite way to end it.
}

async fn read_loop(
    mut lines: FramedRead<tokio::process::ChildStdout, LineCodec>,
    (mux, sink): (Mux, Arc<dyn EventSink>),
    cancel: CancellationToken,
    label: Arc<str>,
    (report, record): (Arc<ExitReport>, Arc<Record>),
) {
    let mut spoke = false;
    let end = loop {
        let item = tokio::select! {
            () = cancel.cancelled() => break None,
            item = lines.next() => item,
        };
        let line = match item {
            None => break Some("closed its stdout".to_string()),
            Some(Err(e)) => break Some(format!("stdout failed ({e})")),
            Some(Ok(Line::TooLong)) => {
                warn!(session = %label, "stdio upstream sent an over-long line; dropped");
                continue;
            }
            Some(Ok(Line::NotUtf8)) => {
                warn!(session = %label, "stdio upstream sent a line that is not UTF-8; dropped");
                continue;
            }
            Some(Ok(Line::Text(line))) => line,
        };
        if line.trim().is_empty() {
            continue;
        }
        let msg = match Message::parse(Bytes::from(line)) {
            Ok(m) => m,
            Err(e) => {
                warn!(session = %label, error = %e, "stdio upstream sent a line that is not JSON-RPC; dropped");
                continue;
            }
        };
        // Started: it spoke JSON-RPC (a banner line before dying is not a start).
        if !spoke {
            spoke = true;
            record.started();
        }
        mux.incoming(msg, &*sink, &label);
    };
    // Fail what is still in flight, then tell the session.
    let Some(end) = end else {
        mux.close(&UpstreamError::Closed);
        return;
    };
    let exit = report.describe(&end).await;
    if !spoke && !cancel.is_cancelled() {
        let wait = record.failed(exit.to_string());
        warn!(session = %label, "stdio upstream ended before it wrote a line; its next start waits {wait:?}");
    }
    let why = UpstreamError::Exited(exit);
    if cancel.is_cancelled() {
        mux.close(&UpstreamError::Closed);
        return;
    }
    warn!(session = %label, "stdio upstream {why}");
    mux.close(&why);
    sink.closed(why);
}

async fn stderr_loop(
    stderr: tokio::process::ChildStderr,
    cancel: CancellationToken,
    label: Arc<str>,
    report: Arc<ExitReport>,
) {
    let mut lines = FramedRead::new(stderr, LineCodec::new(16 * 1024));
    loop {
        let item = tokio::select! {
            () = cancel.cancelled() => break,
            item = lines.next() => item,
        };
        match item {
            None | Some(Err(_)) => break,
            Some(Ok(Line::NotUtf8)) => {
                debug!(session = %label, "stderr: (a line that is not UTF-8)")
            }
            Some(Ok(Line::TooLong)) => {
                debug!(session = %label, "stderr: (over-long line)")
            }
            Some(Ok(Line::Text(line))) => {
                debug!(session = %label, "stderr: {line}");
                report.stderr_line(&line);
            }
        }
    }
    report.stderr_done.send_replace(true);
}

/// Owns the child: reaps it when it exits on its own, or ends it when the session is
/// cancelled. Either way the whole process group is killed at the end, so no grandchild
/// outlives the session.
/// What reaps a child: how long each teardown step may take, the count of live
/// children, who waits for the outcome, and where its exit status goes.
struct Supervisor {
    grace: Duration,
    held: Held,
    done: oneshot::Sender<Teardown>,
    report: Arc<ExitReport>,
}

impl Supervisor {
    async fn run(self, child: Child, cancel: CancellationToken, label: Arc<str>) {
        let Supervisor {
            grace,
            held,
            done,
            report,
        } = self;
        let outcome = supervise(child, cancel, grace, &label, (&report, &held)).await;
        held.release().await;
        debug!(session = %label, outcome = %outcome, "stdio upstream reaped");
        let _ = done.send(outcome);
    }
}

/// Waits for the child to end on its own, or ends it once `cancel` fires: stdin closed,
/// then SIGTERM, then SIGKILL of its process group, each after `grace`.
async fn supervise(
    mut child: Child,
    cancel: CancellationToken,
    grace: Duration,
    label: &str,
    (report, held): (&ExitReport, &Held),
) -> Teardown {
    let pgid = child
        .id()
        .and_then(|p| i32::try_from(p).ok())
        .map(Pid::from_raw);
    let outcome = tokio::select! {
        status = child.wait() => {
            let mut how = status.as_ref().map_or_else(|e| format!("could not be waited for ({e})"), status_text);
            if let Some((limit, bound)) = held.bound_reached(status.as_ref().ok().and_then(signal_of)) {
                how = format!("was ended by the gateway: {bound}");
                if let Ok(mut l) = report.limit.lock() {
                    *l = Some(limit);
                }
            }
            info!(session = %label, "stdio upstream {how}");
            report.status.send_replace(Some(how));
            Teardown::AlreadyEnded
        }
        () = cancel.cancelled() => {
            // stdin is closed by the writer on cancellation; give the child time to leave.
            match tokio::time::timeout(grace, child.wait()).await {
                Ok(status) => Teardown::Exited(status.ok().and_then(|s| s.code())),
                Err(_) => {
                    signal(pgid, Signal::SIGTERM);
                    match tokio::time::timeout(grace, child.wait()).await {
                        Ok(_) => Teardown::Terminated,
                        Err(_) => {
                            signal(pgid, Signal::SIGKILL);
                            let _ = child.kill().await;
                            Teardown::Killed
                        }
                    }
                }
            }
        }
    };
    // Leftover members of the group (a wrapper's grandchildren) go too.
    signal(pgid, Signal::SIGKILL);
    outcome
}

/// The signal that ended a child, if one did.
fn signal_of(status: &std::process::ExitStatus) -> Option<Signal> {
    use std::os::unix::process::ExitStatusExt;
    status.signal().and_then(|s| Signal::try_from(s).ok())
}

fn signal(pgid: Option<Pid>, sig: Signal) {
    if let Some(pgid) = pgid {
        // ESRCH (group already gone) is the expected, harmless outcome.
        let _ = killpg(pgid, sig);
    }
}
