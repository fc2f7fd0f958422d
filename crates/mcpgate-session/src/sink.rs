//! The session's event sink: where an upstream's reader delivers what belongs to no
//! request, synchronously and in pipe order, into the owning session's router.

use std::sync::{Arc, Mutex, OnceLock, Weak};

use mcpgate_jsonrpc::Message;
use mcpgate_upstream::{EventSink, UpstreamError};

use crate::metrics::Metrics;
use crate::router::Router;
use crate::session::Session;

/// The session's [`EventSink`]: the upstream's reader calls it synchronously, so server
/// messages reach this session's router in the order the upstream sent them. It holds
/// the session's router and (once attached) a weak reference to the session — nothing of
/// any other session.
#[derive(Debug)]
pub(crate) struct Sink {
    router: Arc<Mutex<Router>>,
    tag: Arc<str>,
    metrics: Arc<Metrics>,
    session: OnceLock<Weak<Session>>,
    /// The upstream ended before the session was attached.
    ended_early: Mutex<Option<UpstreamError>>,
}

impl Sink {
    pub(crate) fn new(router: Arc<Mutex<Router>>, tag: &str, metrics: Arc<Metrics>) -> Self {
        Sink {
            router,
            tag: Arc::from(tag),
            metrics,
            session: OnceLock::new(),
            ended_early: Mutex::new(None),
        }
    }

    /// Binds the sink to its session (once); reports an end that came before.
    pub(crate) fn attach(&self, session: &Arc<Session>) {
        let _ = self.session.set(Arc::downgrade(session));
        let early = self.ended_early.lock().ok().and_then(|mut e| e.take());
        if let Some(e) = early {
            session.upstream_ended(e);
        }
    }
}

impl EventSink for Sink {
    fn message(&self, msg: Message) {
        crate::router::deliver(&self.router, msg, &self.tag, &self.metrics);
    }

    fn closed(&self, why: UpstreamError) {
        match self.session.get().and_then(Weak::upgrade) {
            Some(s) => s.upstream_ended(why),
            None => {
                if let Ok(mut e) = self.ended_early.lock() {
                    *e = Some(why);
                }
            }
        }
    }
}
