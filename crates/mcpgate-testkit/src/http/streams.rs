//! A session's SSE streams with event ids and replay (MCP 2025-11-25
//! "Resumability and Redelivery").
//!
//! Every event carries `id: <stream>-<seq>`: `<stream>` is `0` for the
//! session's standalone (GET) stream and `1`, `2`, … for its POST response
//! streams in the order they were opened; `<seq>` counts up from 1 within the
//! stream. Each stream keeps its last [`LOG_CAP`] events, so a client can
//! resume it with `GET` + `Last-Event-ID`.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use tokio::sync::mpsc;

use super::lock;

/// How many events each stream keeps for replay.
pub(super) const LOG_CAP: usize = 1000;
/// How many finished POST streams a session keeps for replay.
pub(super) const FINISHED_CAP: usize = 100;
/// The stream number of a session's standalone (GET) stream.
pub(super) const STANDALONE: u64 = 0;

/// What the connection reading a stream receives.
#[derive(Debug)]
pub(super) enum Live {
    /// One formatted SSE event; `response` is true for the JSON-RPC response
    /// that ends a POST stream.
    Event { frame: Bytes, response: bool },
    /// The call kills the connection (`die` tool).
    Die,
}

/// The sending half of a reader's channel: counts what the reader has not taken yet.
#[derive(Debug)]
pub(super) struct ReaderTx {
    tx: mpsc::UnboundedSender<Live>,
    queued: Arc<AtomicUsize>,
}

/// The receiving half of a reader's channel (the body of an SSE response).
#[derive(Debug)]
pub(super) struct ReaderRx {
    rx: mpsc::UnboundedReceiver<Live>,
    queued: Arc<AtomicUsize>,
}

/// A new reader channel.
pub(super) fn reader_channel() -> (ReaderTx, ReaderRx) {
    let (tx, rx) = mpsc::unbounded_channel();
    let queued = Arc::new(AtomicUsize::new(0));
    (
        ReaderTx {
            tx,
            queued: Arc::clone(&queued),
        },
        ReaderRx { rx, queued },
    )
}

impl ReaderTx {
    fn send(&self, live: Live) -> bool {
        let sent = self.tx.send(live).is_ok();
        if sent {
            self.queued.fetch_add(1, Ordering::Relaxed);
        }
        sent
    }
}

impl ReaderRx {
    /// The next item for the connection; `None` once the stream let go of it.
    pub(super) async fn recv(&mut self) -> Option<Live> {
        let item = self.rx.recv().await;
        if item.is_some() {
            self.queued.fetch_sub(1, Ordering::Relaxed);
        }
        item
    }
}

#[derive(Debug)]
struct Logged {
    seq: u64,
    frame: Bytes,
    response: bool,
}

#[derive(Debug)]
struct Inner {
    next_seq: u64,
    log: VecDeque<Logged>,
    reader: Option<ReaderTx>,
    finished: bool,
}

/// One SSE stream of a session: its bounded event log and the connection
/// reading it, if any. Events are logged whether or not anybody reads them.
#[derive(Debug)]
pub(super) struct EventStream {
    num: u64,
    inner: Mutex<Inner>,
}

/// `id: <stream>-<seq>`, then the message as one `data` line.
fn event_frame(stream: u64, seq: u64, msg: &str) -> Bytes {
    Bytes::from(format!(
        "id: {stream}-{seq}\nevent: message\ndata: {msg}\n\n"
    ))
}

/// A priming event: an id and empty data.
fn priming_frame(stream: u64, seq: u64) -> Bytes {
    Bytes::from(format!("id: {stream}-{seq}\ndata:\n\n"))
}

/// Parses a `Last-Event-ID` of the form `<stream>-<seq>`.
pub(super) fn parse_event_id(id: &str) -> Option<(u64, u64)> {
    let (stream, seq) = id.trim().split_once('-')?;
    Some((stream.parse().ok()?, seq.parse().ok()?))
}

impl EventStream {
    pub(super) fn new(num: u64) -> Self {
        Self {
            num,
            inner: Mutex::new(Inner {
                next_seq: 1,
                log: VecDeque::new(),
                reader: None,
                finished: false,
            }),
        }
    }

    pub(super) fn num(&self) -> u64 {
        self.num
    }

    /// Logs one message as the stream's next event and hands it to the
    /// reader, if any. True if a reader took it; false if nobody reads the
    /// stream now (the event stays in the log) or the stream has finished
    /// (the event is dropped).
    pub(super) fn push(&self, msg: &str, response: bool) -> bool {
        let mut g = lock(&self.inner);
        if g.finished {
            return false;
        }
        let seq = g.next_seq;
        g.next_seq += 1;
        let frame = event_frame(self.num, seq, msg);
        if g.log.len() >= LOG_CAP {
            g.log.pop_front();
        }
        g.log.push_back(Logged {
            seq,
            frame: frame.clone(),
            response,
        });
        let sent = g
            .reader
            .as_ref()
            .is_some_and(|tx| tx.send(Live::Event { frame, response }));
        if !sent {
            g.reader = None;
        }
        sent
    }

    /// Hands one message to the reader, if any, as the stream's next event without
    /// logging it (a flood must not fill the replay log). True if a reader took it.
    pub(super) fn push_unlogged(&self, msg: &str) -> bool {
        let mut g = lock(&self.inner);
        if g.finished {
            return false;
        }
        let seq = g.next_seq;
        g.next_seq += 1;
        let frame = event_frame(self.num, seq, msg);
        let sent = g.reader.as_ref().is_some_and(|tx| {
            tx.send(Live::Event {
                frame,
                response: false,
            })
        });
        if !sent {
            g.reader = None;
        }
        sent
    }

    /// Events handed to the current reader that its connection has not taken yet
    /// (0 without a reader).
    pub(super) fn reader_backlog(&self) -> usize {
        lock(&self.inner)
            .reader
            .as_ref()
            .map_or(0, |r| r.queued.load(Ordering::Relaxed))
    }

    /// Whether the stream has finished (no more events).
    pub(super) fn is_finished(&self) -> bool {
        lock(&self.inner).finished
    }

    /// No more events: the reader's connection ends after what it was sent.
    pub(super) fn finish(&self) {
        let mut g = lock(&self.inner);
        g.finished = true;
        g.reader = None;
    }

    /// Aborts the reader's connection, then finishes.
    pub(super) fn die(&self) {
        let mut g = lock(&self.inner);
        if let Some(tx) = g.reader.take() {
            // A reader already gone has nothing left to abort.
            let _ = tx.send(Live::Die);
        }
        g.finished = true;
    }

    /// Makes `tx` the stream's reader, replacing an earlier one (whose
    /// connection then ends). With `replay_after`, first sends it the logged
    /// events after that sequence number. A finished stream gets no reader:
    /// its connection ends after the replay. With `prime`, returns a priming
    /// event (with the next sequence number) for the reader to send first.
    pub(super) fn attach(
        &self,
        tx: ReaderTx,
        replay_after: Option<u64>,
        prime: bool,
    ) -> Option<Bytes> {
        let mut g = lock(&self.inner);
        let priming = prime.then(|| {
            let seq = g.next_seq;
            g.next_seq += 1;
            priming_frame(self.num, seq)
        });
        if let Some(after) = replay_after {
            for e in g.log.iter().filter(|e| e.seq > after) {
                let live = Live::Event {
                    frame: e.frame.clone(),
                    response: e.response,
                };
                if !tx.send(live) {
                    break;
                }
            }
        }
        g.reader = (!g.finished).then_some(tx);
        priming
    }
}

/// The POST response streams of one session.
#[derive(Debug)]
pub(super) struct Streams {
    next: u64,
    by_num: HashMap<u64, Arc<EventStream>>,
    finished: VecDeque<u64>,
}

impl Default for Streams {
    fn default() -> Self {
        Self {
            next: STANDALONE + 1,
            by_num: HashMap::new(),
            finished: VecDeque::new(),
        }
    }
}

impl Streams {
    /// Opens the session's next POST response stream.
    pub(super) fn open(&mut self) -> Arc<EventStream> {
        let stream = Arc::new(EventStream::new(self.next));
        self.next += 1;
        self.by_num.insert(stream.num(), Arc::clone(&stream));
        stream
    }

    /// A POST stream the session still keeps.
    pub(super) fn get(&self, num: u64) -> Option<Arc<EventStream>> {
        self.by_num.get(&num).cloned()
    }

    /// Records that a stream finished; forgets the oldest finished ones
    /// beyond [`FINISHED_CAP`].
    pub(super) fn retire(&mut self, num: u64) {
        self.finished.push_back(num);
        while self.finished.len() > FINISHED_CAP {
            if let Some(old) = self.finished.pop_front() {
                self.by_num.remove(&old);
            }
        }
    }

    /// Finishes every stream (the session ended).
    pub(super) fn finish_all(&self) {
        for s in self.by_num.values() {
            s.finish();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(rx: &mut ReaderRx) -> Vec<String> {
        let mut out = Vec::new();
        while let Ok(item) = rx.rx.try_recv() {
            match item {
                Live::Event { frame, .. } => out.push(String::from_utf8_lossy(&frame).into_owned()),
                Live::Die => out.push("die".into()),
            }
        }
        out
    }

    #[test]
    fn logs_replays_and_bounds() {
        let s = EventStream::new(3);
        assert!(!s.push("a", false));
        let (tx, mut rx) = reader_channel();
        let prime = s.attach(tx, None, true);
        assert_eq!(prime.as_deref(), Some(&b"id: 3-2\ndata:\n\n"[..]));
        assert!(s.push("b", false));
        assert_eq!(frames(&mut rx), ["id: 3-3\nevent: message\ndata: b\n\n"]);

        let (tx, mut rx) = reader_channel();
        assert!(s.attach(tx, Some(0), false).is_none());
        assert!(s.push("c", true));
        s.finish();
        assert!(!s.push("late", false));
        let got = frames(&mut rx);
        assert_eq!(got.len(), 3, "{got:?}");
        assert!(got[0].starts_with("id: 3-1\n") && got[2].starts_with("id: 3-4\n"));

        let big = EventStream::new(0);
        for _ in 0..LOG_CAP + 5 {
            big.push("x", false);
        }
        let (tx, mut rx) = reader_channel();
        big.attach(tx, Some(0), false);
        let got = frames(&mut rx);
        assert_eq!(got.len(), LOG_CAP);
        assert!(got[0].starts_with("id: 0-6\n"), "{}", got[0]);
        assert_eq!(parse_event_id("12-34"), Some((12, 34)));
        assert_eq!(parse_event_id("x-1"), None);
        assert_eq!(parse_event_id("5"), None);
    }

    #[test]
    fn retires_beyond_cap() {
        let mut streams = Streams::default();
        let live = streams.open();
        assert_eq!(live.num(), 1);
        for _ in 0..FINISHED_CAP + 1 {
            let s = streams.open();
            streams.retire(s.num());
        }
        assert!(streams.get(1).is_some(), "a live stream is kept");
        assert!(
            streams.get(2).is_none(),
            "the oldest finished one is forgotten"
        );
        assert!(streams.get(3).is_some());
    }
}
