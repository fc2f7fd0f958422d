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
        Routed::SlowStreamEnded => {
            warn!(session = %tag, "client GET stream too slow; ended it (the client can reconnect)");
        }
        Routed::BufferedDroppedOldest => {
            warn!(session = %tag, "session backlog full; dropped the oldest server message");
            metrics.backlog_dropped.inc();
        }
    }
}

/// Outcome of routing one message, for metrics and logs.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Routed {
    Delivered,
    Buffered,
    /// Buffered, and the oldest buffered message was dropped to make room.
    BufferedDroppedOldest,
    /// The GET stream's reader was too slow: the stream was ended (the client reconnects)
    /// and the message buffered.
    SlowStreamEnded,
}

#[derive(Debug)]
pub(crate) struct Router {
    get: Option<mpsc::Sender<Message>>,
    posts: Vec<(u64, mpsc::Sender<Message>)>,
    backlog: VecDeque<Message>,
    cap: usize,
}

impl Router {
    pub(crate) fn new(cap: usize) -> Self {
        Router {
            get: None,
            posts: Vec::new(),
            backlog: VecDeque::new(),
            cap: cap.max(1),
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
            if let Err(e) = tx.try_send(m) {
                self.backlog.push_front(e.into_inner());
                break;
            }
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
                    outcome = Routed::SlowStreamEnded;
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
        let dropped = if self.backlog.len() >= self.cap {
            self.backlog.pop_front();
            true
        } else {
            false
        };
        self.backlog.push_back(msg);
        match outcome {
            Routed::SlowStreamEnded => outcome,
            _ if dropped => Routed::BufferedDroppedOldest,
            _ => Routed::Buffered,
        }
    }

    /// Drops every client stream (their bodies end) and the backlog.
    pub(crate) fn clear(&mut self) {
        self.get = None;
        self.posts.clear();
        self.backlog.clear();
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
        let mut r = Router::new(2);
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
        let mut r = Router::new(1);
        let _get = r.open_get().unwrap();
        assert_eq!(r.route(note(1)), Routed::Delivered);
        assert_eq!(r.route(note(2)), Routed::SlowStreamEnded);
        assert!(!r.has_live_get());
        assert_eq!(r.route(note(3)), Routed::BufferedDroppedOldest);
    }

    #[test]
    fn closed_get_falls_back() {
        let mut r = Router::new(4);
        drop(r.open_get().unwrap());
        assert_eq!(r.route(note(1)), Routed::Buffered);
        let mut get = r.open_get().unwrap();
        assert!(get.try_recv().is_ok());
    }
}
