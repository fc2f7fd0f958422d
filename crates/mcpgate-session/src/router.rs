//! Where a server message that belongs to no request goes — always within its session.
//!
//! Order of preference: the session's open GET stream; else an in-flight POST stream of
//! the same session (many clients never open a GET stream); else a bounded backlog that
//! is flushed into the next GET stream. A stream that ends hands back what it did not
//! send. Nothing is ever sent to another session: a `Router` belongs to one `Session`.

use std::collections::VecDeque;

use std::sync::Mutex;

use mcpgate_jsonrpc::Message;
use tokio::sync::mpsc::{self, error::TrySendError};
use tracing::warn;

use crate::metrics::Metrics;

/// Routes one message into a session's router and accounts for what happened.
pub(crate) fn deliver(router: &Mutex<Router>, msg: Message, tag: &str, metrics: &Metrics) {
    let routed = match router.lock() {
        Ok(mut r) => r.route(msg),
        Err(_) => return,
    };
    match routed {
        Routed::Delivered | Routed::Buffered => {}
        Routed::SlowStreamEnded(dropped) => {
            warn!(session = %tag, "client GET stream too slow; ended it (the client can reconnect)");
            metrics.backlog_dropped.inc_by(dropped);
        }
        Routed::BufferedDropped(dropped) => {
            warn!(session = %tag, dropped, "session backlog full; dropped the oldest server messages");
            metrics.backlog_dropped.inc_by(dropped);
        }
    }
}

/// Outcome of routing one message, for metrics and logs.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Routed {
    Delivered,
    Buffered,
    /// Buffered, and this many of the oldest buffered messages were dropped to make room
    /// (the backlog is bounded in messages and in bytes).
    BufferedDropped(u64),
    /// The GET stream's reader was too slow: the stream was ended (the client reconnects)
    /// and the message buffered (dropping this many of the oldest).
    SlowStreamEnded(u64),
}

#[derive(Debug)]
pub(crate) struct Router {
    get: Option<mpsc::Sender<Message>>,
    posts: Vec<(u64, mpsc::Sender<Message>)>,
    backlog: VecDeque<Message>,
    /// Bytes of `backlog`.
    backlog_bytes: usize,
    /// Messages per client stream; bounds of the backlog.
    cap: usize,
    bounds: crate::replay::Bounds,
}

impl Router {
    pub(crate) fn new(cap: usize, max_bytes: usize) -> Self {
        Router {
            get: None,
            posts: Vec::new(),
            backlog: VecDeque::new(),
            backlog_bytes: 0,
            cap: cap.max(1),
            bounds: crate::replay::Bounds {
                events: cap.max(1),
                bytes: max_bytes,
            },
        }
    }

    pub(crate) fn has_live_get(&self) -> bool {
        self.get.as_ref().is_some_and(|g| !g.is_closed())
    }

    /// Registers a new GET stream and flushes the backlog into it.
    pub(crate) fn open_get(&mut self) -> Option<mpsc::Receiver<Message>> {
        if self.has_live_get() {
            return None;
        }
        let (tx, rx) = mpsc::channel(self.cap);
        while let Some(m) = self.backlog.pop_front() {
            let n = m.raw().len();
            if let Err(e) = tx.try_send(m) {
                self.backlog.push_front(e.into_inner());
                break;
            }
            self.backlog_bytes -= n;
        }
        self.get = Some(tx);
        Some(rx)
    }

    /// Forgets the GET stream (its reader ends once it drained what it has).
    pub(crate) fn drop_get(&mut self) {
        self.get = None;
    }

    pub(crate) fn add_post(&mut self, key: u64) -> mpsc::Receiver<Message> {
        let (tx, rx) = mpsc::channel(self.cap);
        self.posts.push((key, tx));
        rx
    }

    pub(crate) fn remove_post(&mut self, key: u64) {
        self.posts.retain(|(k, _)| *k != key);
    }

    pub(crate) fn route(&mut self, msg: Message) -> Routed {
        let mut outcome = Routed::Delivered;
        let mut msg = msg;
        if let Some(get) = &self.get {
            match get.try_send(msg) {
                Ok(()) => return Routed::Delivered,
                Err(TrySendError::Full(m)) => {
                    self.get = None;
                    outcome = Routed::SlowStreamEnded(0);
                    msg = m;
                }
                Err(TrySendError::Closed(m)) => {
                    self.get = None;
                    msg = m;
                }
            }
        }
        if outcome == Routed::Delivered {
            let mut i = 0;
            while i < self.posts.len() {
                match self.posts[i].1.try_send(msg) {
                    Ok(()) => return Routed::Delivered,
                    Err(TrySendError::Full(m)) => {
                        msg = m;
                        i += 1;
                    }
                    Err(TrySendError::Closed(m)) => {
                        msg = m;
                        self.posts.remove(i);
                    }
                }
            }
        }
        let mut dropped = 0;
        while self
            .bounds
            .full(self.backlog.len(), self.backlog_bytes, msg.raw().len())
        {
            if let Some(old) = self.backlog.pop_front() {
                self.backlog_bytes -= old.raw().len();
            }
            dropped += 1;
        }
        self.backlog_bytes += msg.raw().len();
        self.backlog.push_back(msg);
        match outcome {
            Routed::SlowStreamEnded(_) => Routed::SlowStreamEnded(dropped),
            _ if dropped > 0 => Routed::BufferedDropped(dropped),
            _ => Routed::Buffered,
        }
    }

    /// Forgets the buffered messages (a pooled session between two requests), but for
    /// the server's requests among them, which are handed back to be answered.
    pub(crate) fn drop_backlog(&mut self) -> Vec<Message> {
        self.backlog_bytes = 0;
        self.backlog.drain(..).filter(Message::is_request).collect()
    }

    /// Drops every client stream (their bodies end) and the backlog.
    pub(crate) fn clear(&mut self) {
        self.get = None;
        self.posts.clear();
        self.backlog.clear();
        self.backlog_bytes = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn note(n: u32) -> Message {
        Message::parse(Bytes::from(format!(
            r#"{{"jsonrpc":"2.0","method":"n","params":{{"n":{n}}}}}"#
        )))
        .unwrap()
    }

    #[test]
    fn prefers_get_then_post_then_backlog() {
        let mut r = Router::new(2, 1 << 20);
        let mut post = r.add_post(1);
        assert_eq!(r.route(note(1)), Routed::Delivered);
        assert!(post.try_recv().is_ok());
        r.remove_post(1);
        assert_eq!(r.route(note(2)), Routed::Buffered);
        let mut get = r.open_get().unwrap();
        assert!(r.open_get().is_none(), "one GET stream at a time");
        assert_eq!(get.try_recv().unwrap().raw(), note(2).raw());
        assert_eq!(r.route(note(3)), Routed::Delivered);
        assert_eq!(get.try_recv().unwrap().raw(), note(3).raw());
    }

    #[test]
    fn slow_get_stream_is_ended_not_waited_for() {
        let mut r = Router::new(1, 1 << 20);
        let _get = r.open_get().unwrap();
        assert_eq!(r.route(note(1)), Routed::Delivered);
        assert_eq!(r.route(note(2)), Routed::SlowStreamEnded(0));
        assert!(!r.has_live_get());
        assert_eq!(r.route(note(3)), Routed::BufferedDropped(1));
    }

    #[test]
    fn closed_get_falls_back() {
        let mut r = Router::new(4, 1 << 20);
        drop(r.open_get().unwrap());
        assert_eq!(r.route(note(1)), Routed::Buffered);
        let mut get = r.open_get().unwrap();
        assert!(get.try_recv().is_ok());
    }

    #[test]
    fn the_backlog_is_bounded_in_bytes_too() {
        let one = note(1).raw().len();
        // Room for 100 messages by count, 3 by bytes.
        let mut r = Router::new(100, 3 * one);
        for n in 0..3 {
            assert_eq!(r.route(note(n)), Routed::Buffered);
        }
        assert_eq!(r.route(note(3)), Routed::BufferedDropped(1));
        // A message larger than the whole budget is still kept, alone.
        let big = Message::parse(Bytes::from(format!(
            r#"{{"jsonrpc":"2.0","method":"n","params":{{"pad":"{}"}}}}"#,
            "x".repeat(10 * one)
        )))
        .unwrap();
        assert_eq!(r.route(big), Routed::BufferedDropped(3));
        let mut get = r.open_get().unwrap();
        assert!(get.try_recv().unwrap().raw().len() > 10 * one);
        assert!(get.try_recv().is_err());
    }
}
