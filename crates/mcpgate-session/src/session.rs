//! One client session: its upstream, its streams, its task, and its one teardown path.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use mcpgate_jsonrpc::Message;
use mcpgate_upstream::{Upstream, UpstreamError};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::error::SessionError;
use crate::kinds::{CloseReason, FrontKind};
use crate::replay::{EventLog, Logs};
use crate::router::Router;
use crate::shared::Shared;
use crate::spec::ServerSpec;

/// A client session and the dedicated upstream session it owns.
pub struct Session {
    pub(crate) id: Arc<str>,
    /// The first characters of the id: enough to tell sessions apart in logs without
    /// writing a usable credential into them.
    pub(crate) tag: Arc<str>,
    pub(crate) server: Arc<str>,
    /// How long the session may idle before it is closed, in milliseconds.
    idle_ms: u64,
    /// Whether the session may be evicted while idle when the gateway is full.
    pub(crate) evict_idle: bool,
    pub(crate) front: FrontKind,
    /// Who opened the session (authenticated identity); only they may use it.
    pub(crate) principal: Option<Arc<str>>,
    /// Messages from the client forwarded upstream.
    pub(crate) messages_in: AtomicU64,
    /// Messages from the upstream delivered toward the client.
    pub(crate) messages_out: AtomicU64,
    pub(crate) upstream: Upstream,
    /// Child of the table's root token; cancelling it stops every task and timer the
    /// session started, and fails its in-flight requests.
    pub(crate) cancel: CancellationToken,
    /// Plain mutex: held only for non-blocking `try_send`s, never across an `.await`.
    /// Shared with the upstream's [`Sink`], which routes into it from the reader task.
    pub(crate) router: Arc<Mutex<Router>>,
    /// Milliseconds since the table's epoch of the last client activity.
    pub(crate) last_active: AtomicU64,
    pub(crate) inflight: AtomicUsize,
    pub(crate) next_key: AtomicU64,
    closing: AtomicBool,
    /// Why the session is closing, set once with `closing`.
    reason: OnceLock<CloseReason>,
    /// What the upstream did that ended the session, when that is why it ended.
    cause: OnceLock<UpstreamError>,
    closed_tx: watch::Sender<bool>,
    /// What every session shares (strong: no upgrade per request).
    pub(crate) shared: Arc<Shared<Session>>,
    pub(crate) created: Instant,
    /// Replay logs of the session's SSE streams.
    logs: Mutex<Logs>,
    /// The sealed id the client holds, once sealed (then `id` is only this replica's key).
    pub(crate) sealed_id: OnceLock<Arc<str>>,
    /// When a sealed id of a stateless upstream stops opening (s since the Unix epoch).
    pub(crate) sealed_until: OnceLock<u64>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("tag", &self.tag)
            .field("server", &self.server)
            .finish()
    }
}

impl Session {
    pub(crate) fn new(
        id: Arc<str>,
        spec: &ServerSpec,
        origin: (FrontKind, Option<Arc<str>>),
        upstream: Upstream,
        cancel: CancellationToken,
        router: Arc<Mutex<Router>>,
        shared: &Arc<Shared<Session>>,
    ) -> Self {
        let tag: Arc<str> = Arc::from(crate::shared::short_id(&id));
        let idle = spec.idle_timeout.unwrap_or(shared.cfg.idle_timeout);
        Session {
            id,
            tag,
            server: Arc::from(spec.name.as_str()),
            idle_ms: u64::try_from(idle.as_millis()).unwrap_or(u64::MAX),
            evict_idle: spec.evict_idle,
            front: origin.0,
            principal: origin.1,
            messages_in: AtomicU64::new(0),
            messages_out: AtomicU64::new(0),
            upstream,
            cancel,
            router,
            last_active: AtomicU64::new(shared.now_ms()),
            inflight: AtomicUsize::new(0),
            next_key: AtomicU64::new(0),
            closing: AtomicBool::new(false),
            reason: OnceLock::new(),
            cause: OnceLock::new(),
            closed_tx: watch::channel(false).0,
            logs: Mutex::new(Logs::new(
                crate::replay::Bounds {
                    events: shared.cfg.replay_events,
                    bytes: shared.cfg.replay_bytes,
                },
                shared.cfg.replay_streams,
                (
                    shared.metrics.replay_dropped.clone(),
                    shared.metrics.backlog_dropped.clone(),
                ),
            )),
            shared: shared.clone(),
            created: Instant::now(),
            sealed_id: OnceLock::new(),
            sealed_until: OnceLock::new(),
        }
    }

    /// The id the client uses: the sealed id when the session is sealed, else [`Session::id`].
    pub fn client_id(&self) -> &str {
        self.sealed_id.get().map_or(&*self.id, |s| s)
    }

    /// Whether the session is sealed (any replica with the key can serve it).
    pub fn is_sealed(&self) -> bool {
        self.upstream.is_sealed()
    }

    /// Opens the standalone stream resuming the upstream's after its event `last` (a
    /// sealed session's client resuming with an event id of the upstream's, maybe given by
    /// another replica): this connection takes over from an open one.
    pub fn listen_after(self: &Arc<Self>, last: String) -> Result<Listener, SessionError> {
        let l = self.attach_get(true)?;
        self.upstream.listen_after(last);
        Ok(l)
    }

    /// The gateway-minted session id the client uses.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// A short prefix of the id for logs.
    pub fn tag(&self) -> &str {
        &self.tag
    }

    /// The configured server this session talks to.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// How the client reached the gateway.
    pub fn front(&self) -> FrontKind {
        self.front
    }

    /// The authenticated identity that opened the session, if authentication is on.
    pub fn principal(&self) -> Option<&str> {
        self.principal.as_deref()
    }

    /// Messages forwarded from the client upstream, and from the upstream to the client.
    pub fn message_counts(&self) -> (u64, u64) {
        (
            self.messages_in.load(Ordering::Relaxed),
            self.messages_out.load(Ordering::Relaxed),
        )
    }

    /// Time since the last client activity.
    pub fn idle_for(&self) -> std::time::Duration {
        let now = self.shared.now_ms();
        std::time::Duration::from_millis(
            now.saturating_sub(self.last_active.load(Ordering::Relaxed)),
        )
    }

    /// The upstream transport kind.
    pub fn upstream_kind(&self) -> &'static str {
        self.upstream.kind()
    }

    /// Whether the session holds stdio children (its own, or its members').
    pub(crate) fn holds_children(&self) -> bool {
        self.child_pid().is_some()
            || self
                .members()
                .is_some_and(|ms| ms.iter().any(|m| m.up && m.pid.is_some()))
    }

    /// A virtual server's members and whether each is still part of this session
    /// (`None` for a session of one server).
    pub fn members(&self) -> Option<Vec<mcpgate_upstream::MemberState>> {
        self.upstream.members()
    }

    /// The stdio child's pid, if any.
    pub fn child_pid(&self) -> Option<u32> {
        self.upstream.pid()
    }

    /// Whether teardown has started.
    pub fn is_closing(&self) -> bool {
        self.closing.load(Ordering::Acquire)
    }

    /// How long the session has existed.
    pub fn age(&self) -> std::time::Duration {
        self.created.elapsed()
    }

    /// The upstream failure that ended the session, if one did.
    pub fn upstream_cause(&self) -> Option<&UpstreamError> {
        self.cause.get()
    }

    /// Why the session is closing, once it is.
    pub fn close_reason(&self) -> Option<CloseReason> {
        self.reason.get().copied()
    }

    /// Requests in flight.
    pub fn inflight(&self) -> usize {
        self.inflight.load(Ordering::Relaxed)
    }

    pub(crate) fn touch(&self) {
        self.last_active
            .store(self.shared.now_ms(), Ordering::Relaxed);
    }

    /// Whether the session has been idle longer than its idle timeout at `now_ms`.
    pub(crate) fn is_idle(&self, now_ms: u64) -> bool {
        self.is_evictable()
            && now_ms.saturating_sub(self.last_active.load(Ordering::Relaxed)) >= self.idle_ms
    }

    /// Whether nothing is under way: no request in flight, no open client stream.
    pub(crate) fn is_evictable(&self) -> bool {
        !self.is_closing()
            && self.inflight() == 0
            && !self.router.lock().is_ok_and(|r| r.has_live_get())
    }

    /// When the client was last active (table clock, ms).
    pub(crate) fn last_active_ms(&self) -> u64 {
        self.last_active.load(Ordering::Relaxed)
    }

    /// Sends a client notification or response upstream.
    pub async fn notify(self: &Arc<Self>, msg: Message) -> Result<(), SessionError> {
        if self.is_closing() {
            return Err(SessionError::NotFound);
        }
        self.touch();
        self.messages_in.fetch_add(1, Ordering::Relaxed);
        self.shared.metrics.bytes("in", msg.raw().len());
        tokio::select! {
            biased;
            () = self.cancel.cancelled() => Err(SessionError::Closed),
            r = self.upstream.send(msg) => r.map_err(|e| self.upstream_failed(e)),
        }
    }

    /// Counts an SSE stream to this session's client as open until the guard drops.
    pub fn sse_stream(&self) -> Option<crate::metrics::StreamGauge> {
        Some(self.shared.metrics.sse_stream())
    }

    /// A new replay log for a request's SSE stream.
    pub fn new_stream_log(&self) -> Option<Arc<EventLog>> {
        self.logs.lock().ok().map(|mut l| l.create())
    }

    /// The standalone stream's replay log.
    pub fn standalone_log(&self) -> Option<Arc<EventLog>> {
        self.logs.lock().ok().map(|mut l| l.standalone())
    }

    /// The replay log of stream `n`, if the session still has it.
    pub fn stream_log(&self, n: u32) -> Option<Arc<EventLog>> {
        self.logs.lock().ok().and_then(|l| l.get(n))
    }

    /// Opens the session's standalone stream (client GET). One at a time; with
    /// `take_over`, a new stream replaces an open one (a client resuming after its
    /// connection broke, before the gateway noticed).
    pub fn listen(self: &Arc<Self>, take_over: bool) -> Result<Listener, SessionError> {
        let l = self.attach_get(take_over)?;
        self.upstream.listen();
        Ok(l)
    }

    /// Registers the client's standalone stream (opening the upstream's is the caller's).
    fn attach_get(self: &Arc<Self>, take_over: bool) -> Result<Listener, SessionError> {
        if self.is_closing() {
            return Err(SessionError::NotFound);
        }
        let rx = {
            let mut router = self.router.lock().map_err(|_| SessionError::Closed)?;
            if take_over {
                router.drop_get();
            }
            router.open_get().ok_or(SessionError::StreamConflict)?
        };
        self.touch();
        Ok(Listener {
            rx,
            session: self.clone(),
        })
    }

    /// Runs `fut` as a task owned by this session: it is cancelled with the session and
    /// tracked by the table (shutdown waits for it).
    pub fn spawn<F>(self: &Arc<Self>, fut: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let cancel = self.cancel.clone();
        let task = async move {
            tokio::select! {
                () = cancel.cancelled() => {}
                () = fut => {}
            }
        };
        drop(self.shared.tracker.spawn(task));
    }

    /// Counts an upstream failure and, when it leaves the upstream unusable, ends the
    /// session (its next request gets 404 and the client re-initialises).
    pub(crate) fn upstream_failed(self: &Arc<Self>, e: UpstreamError) -> SessionError {
        self.shared.metrics.upstream_error(e.kind());
        if e.is_fatal() && !self.is_closing() {
            let _ = self.cause.set(e.clone());
            warn!(session = %self.tag, server = %self.server, error = %e, "upstream failed; ending session");
            drop(self.close(CloseReason::UpstreamError));
        } else {
            debug!(session = %self.tag, error = %e, "upstream request failed");
        }
        SessionError::Upstream(e)
    }

    /// Delivers a message to this session's client streams like a server message that
    /// belongs to no request (the legacy SSE front answers requests this way: its one
    /// stream carries everything).
    pub fn deliver(&self, msg: Message) {
        self.route_unrelated(msg);
    }

    /// Delivers a message that belongs to no request to this session's streams.
    pub(crate) fn route_unrelated(&self, msg: Message) {
        crate::router::deliver(&self.router, msg, &self.tag, &self.shared.metrics);
    }

    /// The upstream ended the session on its own: end it here too.
    pub(crate) fn upstream_ended(self: &Arc<Self>, e: UpstreamError) {
        if self.is_closing() {
            return;
        }
        info!(session = %self.tag, server = %self.server, reason = %e, "upstream ended the session");
        let _ = self.cause.set(e.clone());
        self.shared.metrics.upstream_error(e.kind());
        drop(self.close(CloseReason::UpstreamClosed));
    }

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
            drop(self.shared.tracker.spawn(fut));
        }
        async move {
            let _ = done.wait_for(|closed| *closed).await;
        }
    }

    async fn teardown(self: Arc<Self>, reason: CloseReason) {
        let t = self.shared.clone();
        // 1. Unreachable for new requests: they get 404 from here on.
        t.map.remove_if(&self.id, |_, s| Arc::ptr_eq(s, &self));
        // 2. Stop everything the session started; in-flight requests fail with an error.
        self.cancel.cancel();
        if let Ok(mut r) = self.router.lock() {
            r.clear();
        }
        // 3. Tell the upstream, bounded; whatever happens is an outcome, not an error. A
        //    sealed session that idles out, is evicted or outlives its replica's shutdown
        //    is only let go of here: its client may go on through another replica, and
        //    the upstream session ends by the client's DELETE or the upstream's expiry.
        let kept = if reason.keeps_sealed() && self.sealed_id.get().is_some() {
            self.upstream.release()
        } else {
            None
        };
        if reason == CloseReason::ClientDelete {
            self.shared
                .sealing
                .forget(&self.id, self.sealed_until.get().copied());
        }
        let outcome = match kept {
            Some(k) => k,
            None => self.upstream.close().await,
        };
        if outcome.is_abnormal() {
            warn!(session = %self.tag, server = %self.server, reason = reason.as_str(), upstream = %outcome, "session closed; upstream teardown was not clean");
        } else {
            info!(session = %self.tag, server = %self.server, reason = reason.as_str(), upstream = %outcome, "session closed");
        }
        if let Some(p) = &self.principal {
            t.release_principal(p);
        }
        if outcome.is_abnormal() {
            t.metrics.upstream_error(outcome.label());
        }
        t.metrics.sessions_active.dec();
        t.metrics
            .by_origin_active
            .get_or_create(&crate::metrics::Origin {
                server: self.server.to_string(),
                front: self.front.as_str(),
            })
            .dec();
        t.metrics
            .sessions_closed
            .get_or_create(&crate::metrics::Reason {
                reason: reason.as_str(),
            })
            .inc();
        self.closed_tx.send_replace(true);
    }
}

/// Gives back an in-flight slot when dropped.
pub(crate) struct InflightSlot(pub(crate) Arc<Session>);

impl Drop for InflightSlot {
    fn drop(&mut self) {
        self.0.inflight.fetch_sub(1, Ordering::AcqRel);
        self.0.touch();
    }
}

/// The client's standalone stream (GET): server messages that belong to no request.
pub struct Listener {
    rx: mpsc::Receiver<Message>,
    session: Arc<Session>,
}

impl Listener {
    /// The next message; `None` when the session ended or the stream was ended because
    /// the client read too slowly.
    pub async fn recv(&mut self) -> Option<Message> {
        let m = tokio::select! {
            biased;
            m = self.rx.recv() => m,
            () = self.session.cancel.cancelled() => None,
        };
        if let Some(m) = &m {
            self.session.messages_out.fetch_add(1, Ordering::Relaxed);
            self.session.shared.metrics.bytes("out", m.raw().len());
        }
        m
    }

    /// The session this stream belongs to.
    pub fn session(&self) -> &Arc<Session> {
        &self.session
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        // Messages accepted but not sent go back to the session, never lost silently.
        self.rx.close();
        let mut left = Vec::new();
        while let Ok(m) = self.rx.try_recv() {
            left.push(m);
        }
        for m in left {
            self.session.route_unrelated(m);
        }
        // A sealed session's upstream stream follows its client's: the next GET, on this
        // replica or another, opens it again from where it was. Not when a new GET took
        // this one's place (a client resuming here): the stream is that one's now. Decided
        // and done under the router lock, which a new GET takes to attach, so one cannot
        // attach (and open the upstream stream) between the check and the stop.
        if let Ok(router) = self.session.router.lock()
            && !router.has_live_get()
        {
            self.session.upstream.unlisten();
        }
        self.session.touch();
    }
}
