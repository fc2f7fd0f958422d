//! The stdio transport: newline-delimited JSON-RPC on stdin/stdout, one log
//! line per request on stderr. Slow calls run concurrently with quick ones.
//! Stdout is also the session's standalone channel (`sample_async`'s request,
//! `notifications/resources/updated`), written after the answer that queued it.
//!
//! Fault tools that write more than messages (`flood`, `garbage` `binary`) queue a
//! control line (starting with [`CONTROL`], which no JSON text does) that the writer
//! thread expands as it writes, so a flood costs no memory and is paced by the pipe.

use std::io::{BufRead, BufWriter, Write};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::rpc::{self, Incoming};
use crate::stats::{StatsCell, bump};
use crate::tools::{self, FaultHooks, McpSession, Outbound, Outcome, Standalone};

/// Options for [`run_stdio`].
#[derive(Debug, Clone, Default)]
pub struct StdioOptions {
    /// Send a timer notification to stdout this long after `initialize`.
    pub timer_ms: Option<u64>,
}

/// The exit code of the `die` tool.
const DIE_EXIT_CODE: i32 = 3;

/// Starts a control line for the writer thread (never the start of a JSON text).
const CONTROL: char = '\0';

/// What the `binary` garbage line holds: bytes that are not UTF-8.
const BINARY_LINE: &[u8] = b"\xff\xfe not UTF-8 \xc3\x28 \x80";

/// The stdio side of the fault tools: control lines for the writer thread.
struct StdioHooks {
    out: mpsc::WeakUnboundedSender<String>,
}

impl FaultHooks for StdioHooks {
    fn flood(&self, count: u64, size: usize) -> futures::future::BoxFuture<'static, u64> {
        let out = self.out.clone();
        // Lazy: a background flood is queued only once the answer is.
        Box::pin(async move {
            let queued = out
                .upgrade()
                .is_some_and(|tx| tx.send(format!("{CONTROL}flood {count} {size}")).is_ok());
            if queued { count } else { 0 }
        })
    }

    fn binary_line(&self) -> bool {
        self.out
            .upgrade()
            .is_some_and(|tx| tx.send(format!("{CONTROL}binary")).is_ok())
    }
}

/// Serves MCP on this process's stdin/stdout until stdin reaches EOF.
///
/// At EOF, hanging calls end unanswered, slow ones finish and are answered,
/// stdout is flushed, and the function returns `Ok(())`. The `die` tool exits
/// the process with code 3 on the spot.
pub async fn run_stdio(opts: StdioOptions) -> std::io::Result<()> {
    let stats = Arc::new(StatsCell::default());
    let (out_tx, out_rx) = mpsc::unbounded_channel::<String>();
    // The standalone channel is stdout too; a weak sender so that it does not
    // keep the writer thread alive past EOF.
    let standalone: Standalone = {
        let weak = out_tx.downgrade();
        Arc::new(move |msg: String| weak.upgrade().is_some_and(|tx| tx.send(msg).is_ok()))
    };
    let hooks = Arc::new(StdioHooks {
        out: out_tx.downgrade(),
    });
    let session = Arc::new(
        McpSession::new(
            std::process::id().to_string(),
            Arc::clone(&stats),
            standalone,
            Arc::default(),
        )
        .with_hooks(hooks),
    );
    let writer = {
        let stats = Arc::clone(&stats);
        std::thread::spawn(move || write_lines(out_rx, &stats))
    };
    let (in_tx, mut in_rx) = mpsc::channel::<Vec<u8>>(64);
    let reader = std::thread::spawn(move || read_lines(&in_tx));

    let tasks = TaskTracker::new();
    let stop_timers = CancellationToken::new();
    while let Some(line) = in_rx.recv().await {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let msg = match rpc::parse(&line) {
            Ok(m) => m,
            Err(error) => {
                eprintln!("testkit: unparsable line");
                let _ = out_tx.send(error);
                continue;
            }
        };
        match msg {
            Incoming::Request { id, method, params } => {
                eprintln!("testkit: {}", tools::label(&method, params.as_ref()));
                if method == "initialize"
                    && let Some(ms) = opts.timer_ms
                {
                    let timer = timer(Arc::clone(&session), Arc::clone(&stats), ms, out_tx.clone());
                    let stop = stop_timers.clone();
                    tasks.spawn(async move {
                        tokio::select! {
                            () = stop.cancelled() => {}
                            () = timer => {}
                        }
                    });
                }
                if tools::streams(&method, params.as_ref()) {
                    let (session, out_tx) = (Arc::clone(&session), out_tx.clone());
                    tasks.spawn(async move {
                        let outcome = session
                            .handle_request(&id, &method, params, Some(&out_tx))
                            .await;
                        deliver(outcome, &out_tx);
                        session.send_deferred();
                    });
                } else {
                    let outcome = session
                        .handle_request(&id, &method, params, Some(&out_tx))
                        .await;
                    deliver(outcome, &out_tx);
                    session.send_deferred();
                }
            }
            Incoming::Notification { method, params } => {
                eprintln!("testkit: {method}");
                session.handle_notification(&method, params.as_ref());
            }
            Incoming::Response { id, result, error } => {
                eprintln!("testkit: response {id}");
                session.handle_response(&id, result, error);
            }
        }
    }

    session.end();
    stop_timers.cancel();
    tasks.close();
    tasks.wait().await;
    drop(out_tx);
    let joined = tokio::task::spawn_blocking(move || (reader.join(), writer.join())).await;
    match joined {
        Ok((Ok(read), Ok(write))) => read.and(write),
        _ => Err(std::io::Error::other("stdio thread failed")),
    }
}

/// [`run_stdio`] with default options, for `mcpgate demo-server`.
pub async fn run_demo_stdio() -> std::io::Result<()> {
    run_stdio(StdioOptions::default()).await
}

fn deliver(outcome: Outcome, out: &Outbound) {
    match outcome {
        Outcome::Reply(body) => {
            // A closed stdout leaves nobody to answer.
            let _ = out.send(body);
        }
        Outcome::Silent => {}
        Outcome::Die => {
            eprintln!("testkit: die");
            std::process::exit(DIE_EXIT_CODE);
        }
    }
}

async fn timer(session: Arc<McpSession>, stats: Arc<StatsCell>, ms: u64, out: Outbound) {
    let msg = tools::timer_notification(session.id());
    tokio::time::sleep(Duration::from_millis(ms)).await;
    if out.send(msg).is_ok() {
        bump(&stats.timer_sent);
    } else {
        bump(&stats.timer_dropped);
    }
}

/// Reads stdin line by line until EOF (runs on its own thread).
fn read_lines(tx: &mpsc::Sender<Vec<u8>>) -> std::io::Result<()> {
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    loop {
        let mut line = Vec::new();
        if input.read_until(b'\n', &mut line)? == 0 {
            return Ok(());
        }
        if tx.blocking_send(line).is_err() {
            return Ok(());
        }
    }
}

/// Writes each message as one line to stdout, flushing when idle (own thread);
/// expands control lines.
fn write_lines(mut rx: mpsc::UnboundedReceiver<String>, stats: &StatsCell) -> std::io::Result<()> {
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    while let Some(line) = rx.blocking_recv() {
        write_line(&mut out, &line, stats)?;
        while let Ok(line) = rx.try_recv() {
            write_line(&mut out, &line, stats)?;
        }
        out.flush()?;
    }
    out.flush()
}

fn write_line(out: &mut impl Write, line: &str, stats: &StatsCell) -> std::io::Result<()> {
    let Some(control) = line.strip_prefix(CONTROL) else {
        out.write_all(line.as_bytes())?;
        return out.write_all(b"\n");
    };
    let mut words = control.split(' ');
    match words.next() {
        Some("flood") => {
            let mut num = || {
                words
                    .next()
                    .and_then(|w| w.parse::<u64>().ok())
                    .unwrap_or(0)
            };
            let (count, size) = (num(), num());
            let size = usize::try_from(size).unwrap_or(usize::MAX);
            for seq in 0..count {
                out.write_all(tools::flood_notification(seq, size).as_bytes())?;
                out.write_all(b"\n")?;
                bump(&stats.flood_sent);
            }
            Ok(())
        }
        Some("binary") => {
            out.write_all(BINARY_LINE)?;
            out.write_all(b"\n")
        }
        _ => Ok(()),
    }
}
