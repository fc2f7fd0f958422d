//! stdio upstream: one child process per client session.
//!
//! A child has one pipe each way, so this module is where routing decisions for a stdio
//! server are made, always within the one session that owns the child:
//! - every request is sent with a fresh numeric id; the response is mapped back to the
//!   client's id and delivered to that request's [`Replies`] only. A client that reuses an
//!   id can therefore never receive another request's answer.
//! - a `notifications/progress` follows its `progressToken` to the request that carried it.
//! - every other server message goes to the session's [`EventSink`], in pipe order.
//!
//! Teardown: close stdin, wait, SIGTERM the process group, wait, SIGKILL, reap.

use std::collections::{BTreeMap, HashMap};
use std::process::Stdio;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use mcpgate_jsonrpc::{Id, Kind, Message, mcp};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::AsyncWriteExt;
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::{mpsc, oneshot};
use tokio_util::codec::{FramedRead, LinesCodec, LinesCodecError};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::{Connector, EventSink, Replies, Teardown, UpstreamError};

type ReplyTx = mpsc::Sender<Result<Message, UpstreamError>>;

/// Requests in flight toward the child, by the id the child saw.
#[derive(Default)]
struct Pending {
    by_child: HashMap<u64, Entry>,
    by_token: HashMap<Id, u64>,
    by_client: HashMap<Id, u64>,
    /// Set once the child's stdout ended: no new request may register.
    closed: bool,
}

struct Entry {
    client_id: Id,
    token: Option<Id>,
    tx: ReplyTx,
}

impl Pending {
    fn remove(&mut self, n: u64) -> Option<Entry> {
        let e = self.by_child.remove(&n)?;
        if let Some(t) = &e.token
            && self.by_token.get(t) == Some(&n)
        {
            self.by_token.remove(t);
        }
        if self.by_client.get(&e.client_id) == Some(&n) {
            self.by_client.remove(&e.client_id);
        }
        Some(e)
    }
}

type Shared = Arc<Mutex<Pending>>;

/// Unregisters a request when its [`Replies`] is dropped (answered or abandoned).
struct Guard {
    shared: Shared,
    n: u64,
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Ok(mut p) = self.shared.lock() {
            p.remove(self.n);
        }
    }
}

/// A dedicated child process.
pub struct StdioUpstream {
    label: Arc<str>,
    pid: Option<u32>,
    writer: mpsc::Sender<Bytes>,
    shared: Shared,
    next_id: AtomicU64,
    cancel: CancellationToken,
    ended: Mutex<Option<oneshot::Receiver<Teardown>>>,
    grace: Duration,
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
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn spawn(
        conn: &Connector,
        command: &[String],
        env: &BTreeMap<String, String>,
        cwd: Option<&str>,
        label: &str,
        cancel: CancellationToken,
        sink: Arc<dyn EventSink>,
        children: Arc<AtomicI64>,
    ) -> Result<Self, UpstreamError> {
        let (program, args) = command
            .split_first()
            .ok_or_else(|| UpstreamError::Spawn("empty command".into()))?;
        let mut cmd = Command::new(program);
        cmd.args(args)
            .envs(env)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            // Its own process group, so that teardown reaches grandchildren (npx → node).
            .process_group(0);
        if let Some(cwd) = cwd {
            cmd.current_dir(cwd);
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| UpstreamError::Spawn(format!("{program}: {e}")))?;
        let pid = child.id();
        children.fetch_add(1, Ordering::Relaxed);
        let label: Arc<str> = Arc::from(label);
        info!(session = %label, pid, command = %program, "started stdio upstream");

        let (stdin, stdout, stderr) =
            match (child.stdin.take(), child.stdout.take(), child.stderr.take()) {
                (Some(i), Some(o), Some(e)) => (i, o, e),
                _ => {
                    // Unreachable with Stdio::piped(); handled rather than assumed.
                    tokio::spawn(supervise(
                        child,
                        cancel.clone(),
                        Duration::ZERO,
                        label.clone(),
                        children,
                        oneshot::channel().0,
                    ));
                    cancel.cancel();
                    return Err(UpstreamError::Spawn("child pipes missing".into()));
                }
            };
        let shared: Shared = Arc::default();
        let (wtx, wrx) = mpsc::channel::<Bytes>(64);
        tokio::spawn(write_loop(stdin, wrx, cancel.clone(), label.clone()));
        tokio::spawn(read_loop(
            FramedRead::new(stdout, LinesCodec::new_with_max_length(conn.max_line)),
            shared.clone(),
            sink,
            cancel.clone(),
            label.clone(),
        ));
        tokio::spawn(stderr_loop(stderr, cancel.clone(), label.clone()));
        let (done_tx, done_rx) = oneshot::channel();
        let grace = conn.timeouts.exit_grace;
        tokio::spawn(supervise(
            child,
            cancel.clone(),
            grace,
            label.clone(),
            children,
            done_tx,
        ));
        Ok(StdioUpstream {
            label,
            pid,
            writer: wtx,
            shared,
            next_id: AtomicU64::new(1),
            cancel,
            ended: Mutex::new(Some(done_rx)),
            grace,
        })
    }

    pub(crate) fn pid(&self) -> Option<u32> {
        self.pid
    }

    pub(crate) async fn request(&self, msg: Message) -> Result<Replies, UpstreamError> {
        let Kind::Request { id: client_id, .. } = msg.kind() else {
            return Err(UpstreamError::Protocol("not a request".into()));
        };
        let n = self.next_id.fetch_add(1, Ordering::Relaxed);
        let out = msg
            .with_id(&Id::number(n))
            .map_err(|e| UpstreamError::Protocol(e.to_string()))?;
        let token = msg.progress_token();
        let (tx, rx) = mpsc::channel(64);
        {
            let mut p = self.shared.lock().map_err(|_| UpstreamError::Closed)?;
            if p.closed {
                return Err(UpstreamError::Exited("stdout closed".into()));
            }
            if let Some(t) = &token {
                p.by_token.insert(t.clone(), n);
            }
            p.by_client.insert(client_id.clone(), n);
            p.by_child.insert(
                n,
                Entry {
                    client_id: client_id.clone(),
                    token,
                    tx,
                },
            );
        }
        let guard = Guard {
            shared: self.shared.clone(),
            n,
        };
        self.writer
            .send(out.into_raw())
            .await
            .map_err(|_| UpstreamError::Exited("stdin closed".into()))?;
        Ok(Replies::channel(rx, Box::new(guard)))
    }

    pub(crate) async fn send(&self, msg: Message) -> Result<(), UpstreamError> {
        let msg = match msg.cancelled_request_id() {
            None => msg,
            Some(client_id) => {
                let n = self
                    .shared
                    .lock()
                    .ok()
                    .and_then(|p| p.by_client.get(&client_id).copied());
                match n {
                    Some(n) => msg
                        .with_cancelled_request_id(&Id::number(n))
                        .map_err(|e| UpstreamError::Protocol(e.to_string()))?,
                    None => {
                        debug!(session = %self.label, id = %client_id, "cancellation for a request no longer in flight; dropped");
                        return Ok(());
                    }
                }
            }
        };
        self.writer
            .send(msg.into_raw())
            .await
            .map_err(|_| UpstreamError::Exited("stdin closed".into()))
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
    mut lines: FramedRead<tokio::process::ChildStdout, LinesCodec>,
    shared: Shared,
    sink: Arc<dyn EventSink>,
    cancel: CancellationToken,
    label: Arc<str>,
) {
    let end = loop {
        let item = tokio::select! {
            () = cancel.cancelled() => break None,
            item = lines.next() => item,
        };
        let line = match item {
            None => break Some("stdout closed".to_string()),
            Some(Err(LinesCodecError::MaxLineLengthExceeded)) => {
                warn!(session = %label, "stdio upstream sent an over-long line; dropped");
                continue;
            }
            Some(Err(LinesCodecError::Io(e))) => break Some(e.to_string()),
            Some(Ok(line)) => line,
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
        route(msg, &shared, &*sink, &label).await;
    };
    // Fail what is still in flight, then tell the session.
    let entries: Vec<Entry> = match shared.lock() {
        Ok(mut p) => {
            p.closed = true;
            p.by_token.clear();
            p.by_client.clear();
            p.by_child.drain().map(|(_, e)| e).collect()
        }
        Err(_) => Vec::new(),
    };
    if let Some(why) = end {
        for e in entries {
            let _ = e.tx.try_send(Err(UpstreamError::Exited(why.clone())));
        }
        if !cancel.is_cancelled() {
            sink.closed(UpstreamError::Exited(why));
        }
    }
}

async fn route(msg: Message, shared: &Shared, sink: &dyn EventSink, label: &str) {
    let target = match msg.kind() {
        Kind::Response { id } => {
            let entry = id
                .as_ref()
                .and_then(Id::as_u64)
                .and_then(|n| shared.lock().ok().and_then(|mut p| p.remove(n)));
            let Some(entry) = entry else {
                debug!(session = %label, id = ?id, "response to no request in flight (cancelled or abandoned); dropped");
                return;
            };
            match msg.with_id(&entry.client_id) {
                Ok(m) => {
                    let _ = entry.tx.send(Ok(m)).await;
                }
                Err(e) => warn!(session = %label, error = %e, "cannot map response id back"),
            }
            return;
        }
        Kind::Notification { method } if &**method == mcp::PROGRESS => {
            msg.progress_token().and_then(|t| {
                let p = shared.lock().ok()?;
                let n = p.by_token.get(&t)?;
                p.by_child.get(n).map(|e| e.tx.clone())
            })
        }
        _ => None,
    };
    match target {
        Some(tx) => {
            if tx.send(Ok(msg)).await.is_err() {
                debug!(session = %label, "progress for an abandoned request; dropped");
            }
        }
        None => sink.message(msg),
    }
}

async fn stderr_loop(
    stderr: tokio::process::ChildStderr,
    cancel: CancellationToken,
    label: Arc<str>,
) {
    let mut lines = FramedRead::new(stderr, LinesCodec::new_with_max_length(16 * 1024));
    loop {
        let item = tokio::select! {
            () = cancel.cancelled() => return,
            item = lines.next() => item,
        };
        match item {
            None | Some(Err(LinesCodecError::Io(_))) => return,
            Some(Err(LinesCodecError::MaxLineLengthExceeded)) => {
                debug!(session = %label, "stderr: (over-long line)")
            }
            Some(Ok(line)) => debug!(session = %label, "stderr: {line}"),
        }
    }
}

/// Owns the child: reaps it when it exits on its own, or ends it when the session is
/// cancelled. Either way the whole process group is killed at the end, so no grandchild
/// outlives the session.
async fn supervise(
    mut child: Child,
    cancel: CancellationToken,
    grace: Duration,
    label: Arc<str>,
    children: Arc<AtomicI64>,
    done: oneshot::Sender<Teardown>,
) {
    let pgid = child
        .id()
        .and_then(|p| i32::try_from(p).ok())
        .map(Pid::from_raw);
    let outcome = tokio::select! {
        status = child.wait() => {
            info!(session = %label, status = ?status.ok(), "stdio upstream exited");
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
    children.fetch_sub(1, Ordering::Relaxed);
    debug!(session = %label, outcome = %outcome, "stdio upstream reaped");
    let _ = done.send(outcome);
}

fn signal(pgid: Option<Pid>, sig: Signal) {
    if let Some(pgid) = pgid {
        // ESRCH (group already gone) is the expected, harmless outcome.
        let _ = killpg(pgid, sig);
    }
}
