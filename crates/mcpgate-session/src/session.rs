//! One client session: its upstream, its streams, its task, and its one teardown path.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use mcpgate_compose::SessionUpstream;
use mcpgate_jsonrpc::Message;
use mcpgate_upstream::UpstreamError;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::error::SessionError;
use crate::kinds::{CloseReason, FrontKind};
use crate::replay::{EventLog, Logs};
use crate::router::Router;
use crate::runtime::Runtime;
use crate::spec::ServerSpec;
use crate::store::Store;

/// Where every session lives and what it runs with: the store of live sessions (a
/// session's teardown takes it out) and the runtime (limits, metrics, tasks, clock).
pub(crate) struct Home {
    pub(crate) sessions: Store<Session>,
    pub(crate) rt: Runtime,
}

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
    pub(crate) upstream: SessionUpstream,
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
    pub(crate) closing: AtomicBool,
    /// Why the session is closing, set once with `closing`.
    pub(crate) reason: OnceLock<CloseReason>,
    /// What the upstream did that ended the session, when that is why it ended.
    pub(crate) cause: OnceLock<UpstreamError>,
    pub(crate) closed_tx: watch::Sender<bool>,
    /// Where the session lives (strong: no upgrade per request).
    pub(crate) home: Arc<Home>,
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
        (upstream, cancel, router): (SessionUpstream, CancellationToken, Arc<Mutex<Router>>),
        home: &Arc<Home>,
    ) -> Self {
        let tag: Arc<str> = Arc::from(crate::store::short_id(&id));
        let rt = &home.rt;
        let idle = spec.idle_timeout.unwrap_or(rt.cfg.idle_timeout);
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
            last_active: AtomicU64::new(rt.now_ms()),
            inflight: AtomicUsize::new(0),
            next_key: AtomicU64::new(0),
            closing: AtomicBool::new(false),
            reason: OnceLock::new(),
            cause: OnceLock::new(),
            closed_tx: watch::channel(false).0,
            logs: Mutex::new(Logs::new(
                crate::replay::Bounds {
                    events: rt.cfg.replay_events,
                    bytes: rt.cfg.replay_bytes,
                },
                rt.cfg.replay_streams,
                (
                    rt.metrics.replay_dropped.clone(),
                    rt.metrics.backlog_dropped.clone(),
                ),
            )),
            home: home.clone(),
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
        self.upstream.sealed().is_some()
    }

    /// Opens the standalone stream resuming the upstream's after its event `last` (a
    /// sealed session's client resuming with an event id of the upstream's, maybe given by
    /// another replica): this connection takes over from an open one.
    pub fn listen_after(self: &Arc<Self>, last: String) -> Result<Listener, SessionError> {
        let l = self.attach_get(true)?;
        if let Some(u) = self.upstream.sealed() {
            u.listen_from(Some(last));
        }
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
        let now = self.home.rt.now_ms();
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
    pub fn members(&self) -> Option<Vec<mcpgate_compose::MemberState>> {
        self.upstream.members()
    }

    /// The stdio child's pid, if any.
    pub fn child_pid(&self) -> Option<u32> {
        self.upstream.pid()
    }

    /// The stdio child's last stderr lines, oldest first (empty without a child).
    pub fn child_stderr(&self) -> Vec<String> {
        self.upstream.stderr_tail()
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

    /// What a failure `e` of the session's `initialize` is to its client: when the session
    /// just ended under it (its upstream exiting at once, say), the upstream's failure —
    /// what ended it, or its end before the answer.
    pub fn init_failure(&self, e: SessionError) -> SessionError {
        match e {
            SessionError::NotFound | SessionError::Closed => {
                SessionError::Upstream(self.upstream_cause().cloned().unwrap_or(
                    UpstreamError::Ended(mcpgate_upstream::Ending::BeforeInitialize),
                ))
            }
            e => e,
        }
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
            .store(self.home.rt.now_ms(), Ordering::Relaxed);
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
        self.home.rt.metrics.bytes("in", msg.raw().len());
        tokio::select! {
            biased;
            () = self.cancel.cancelled() => Err(SessionError::Closed),
            r = self.upstream.send(msg) => r.map_err(|e| self.upstream_failed(e)),
        }
    }

    /// Counts an SSE stream to this session's client as open until the guard drops.
    pub fn sse_stream(&self) -> Option<crate::metrics::StreamGauge> {
        Some(self.home.rt.metrics.sse_stream())
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
        drop(self.home.rt.tracker.spawn(task));
    }

    /// Counts an upstream failure and, when it leaves the upstream unusable, ends the
    /// session (its next request gets 404 and the client re-initialises).
    pub(crate) fn upstream_failed(self: &Arc<Self>, e: UpstreamError) -> SessionError {
        self.home.rt.metrics.upstream_error(e.kind());
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
        crate::router::deliver(&self.router, msg, &self.tag, &self.home.rt.metrics);
    }

    /// The upstream ended the session on its own: end it here too.
    pub(crate) fn upstream_ended(self: &Arc<Self>, e: UpstreamError) {
        if self.is_closing() {
            return;
        }
        info!(session = %self.tag, server = %self.server, reason = %e, "upstream ended the session");
        let _ = self.cause.set(e.clone());
        self.home.rt.metrics.upstream_error(e.kind());
        drop(self.close(CloseReason::UpstreamClosed));
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
            self.session.home.rt.metrics.bytes("out", m.raw().len());
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
            && let Some(u) = self.session.upstream.sealed()
        {
            u.unlisten();
        }
        self.session.touch();
    }
}
