//! The one teardown path of a session: client DELETE, idle expiry, eviction, upstream
//! failure, admin close, reload and shutdown all end a session through
//! [`Session::close`].

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use mcpgate_upstream::Teardown;
use tracing::{info, warn};

use crate::kinds::CloseReason;
use crate::session::Session;

impl Session {
    /// Ends the session: the one teardown path. Starts at most once (later calls wait for
    /// the first); the work runs in a task the table tracks, so a caller that goes away
    /// (a client that hangs up mid-DELETE) cannot interrupt it. The returned future
    /// resolves when teardown is complete and never fails.
    pub fn close(self: &Arc<Self>, reason: CloseReason) -> impl Future<Output = ()> + Send + use<> {
        let mut done = self.closed_tx.subscribe();
        if !self.closing.swap(true, Ordering::AcqRel) {
            let _ = self.reason.set(reason);
            let me = self.clone();
            let fut = async move { me.teardown(reason).await };
            drop(self.home.rt.tracker.spawn(fut));
        }
        async move {
            let _ = done.wait_for(|closed| *closed).await;
        }
    }

    async fn teardown(self: Arc<Self>, reason: CloseReason) {
        // 1. Unreachable for new requests: they get 404 from here on.
        self.home.sessions.remove(&self.id, &self);
        // 2. Stop everything the session started; in-flight requests fail with an error.
        self.cancel.cancel();
        if let Ok(mut r) = self.router.lock() {
            r.clear();
        }
        // 3. Tell the upstream, bounded; whatever happens is an outcome, not an error.
        let outcome = self.end_upstream(reason).await;
        if outcome.is_abnormal() {
            warn!(session = %self.tag, server = %self.server, reason = reason.as_str(), upstream = %outcome, "session closed; upstream teardown was not clean");
        } else {
            info!(session = %self.tag, server = %self.server, reason = reason.as_str(), upstream = %outcome, "session closed");
        }
        // 4. Give back what the session held, and count it.
        if let Some(p) = &self.principal {
            self.home.sessions.release(p);
        }
        self.count_end(reason, &outcome);
        self.closed_tx.send_replace(true);
    }

    /// Ends the upstream session. A sealed session that idles out, is evicted or outlives
    /// its replica's shutdown is only let go of here: its client may go on through another
    /// replica, and the upstream session ends by the client's DELETE or the upstream's
    /// expiry.
    async fn end_upstream(&self, reason: CloseReason) -> Teardown {
        if reason == CloseReason::ClientDelete {
            self.home
                .rt
                .sealer
                .forget(&self.id, self.sealed_until.get().copied());
        }
        let kept = self
            .upstream
            .sealed()
            .filter(|_| reason.keeps_sealed() && self.sealed_id.get().is_some());
        match kept {
            Some(u) => u.release(),
            None => self.upstream.close().await,
        }
    }

    fn count_end(&self, reason: CloseReason, outcome: &Teardown) {
        let m = &self.home.rt.metrics;
        if outcome.is_abnormal() {
            m.upstream_error(outcome.label());
        }
        m.sessions_active.dec();
        m.by_origin_active
            .get_or_create(&crate::metrics::Origin {
                server: self.server.to_string(),
                front: self.front.as_str(),
            })
            .dec();
        m.sessions_closed
            .get_or_create(&crate::metrics::Reason {
                reason: reason.as_str(),
            })
            .inc();
    }
}
