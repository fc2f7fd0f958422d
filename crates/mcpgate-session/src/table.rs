//! The session table: the only place sessions are found, created and counted.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use dashmap::DashMap;
use mcpgate_upstream::Connector;
use prometheus_client::registry::Registry;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{info, warn};

use crate::config::SessionConfig;
use crate::error::SessionError;
use crate::kinds::{CloseReason, FrontKind};
use crate::metrics::Metrics;
use crate::router::Router;
use crate::session::Session;
use crate::shared::{PrincipalSlot, Shared, mint_id};
use crate::sink::Sink;
use crate::spec::ServerSpec;

/// The concurrent table of live sessions. Cheap to clone; every clone is the same table.
#[derive(Clone)]
pub struct SessionTable {
    pub(crate) inner: Arc<Shared<Session>>,
}

impl std::fmt::Debug for SessionTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionTable")
            .field("sessions", &self.inner.map.len())
            .finish()
    }
}

impl SessionTable {
    /// An empty table. `id_prefix` is put in front of every minted id; `servers` are the
    /// configured servers (their idle timeouts set the reaper's pace).
    pub fn new(
        connector: Connector,
        cfg: SessionConfig,
        id_prefix: &str,
        servers: &[ServerSpec],
    ) -> Self {
        let shortest_idle = servers
            .iter()
            .filter_map(|s| s.idle_timeout)
            .min()
            .unwrap_or(cfg.idle_timeout);
        let metrics = Arc::new(Metrics::default());
        for s in servers {
            metrics.set_era(&s.name, crate::eras::configured_era(s.protocol));
        }
        SessionTable {
            inner: Arc::new(Shared {
                map: DashMap::new(),
                per_principal: DashMap::new(),
                connector,
                metrics,
                eras: crate::eras::Eras::new(cfg.era_ttl),
                pools: crate::pool::Pools::new(cfg.lease_wait),
                idle_ms: servers
                    .iter()
                    .map(|s| {
                        let d = s.idle_timeout.unwrap_or(cfg.idle_timeout);
                        (
                            s.name.clone(),
                            u64::try_from(d.as_millis()).unwrap_or(u64::MAX),
                        )
                    })
                    .collect(),
                tracker: TaskTracker::new(),
                root: CancellationToken::new(),
                cfg,
                epoch: Instant::now(),
                shortest_idle,
                prefix: id_prefix.to_owned(),
                accepting: AtomicBool::new(true),
                sealing: crate::sealing::Sealing::default(),
                directory: Default::default(),
            }),
        }
    }

    /// The prefix of every id this table mints (the replica's).
    pub fn id_prefix(&self) -> &str {
        &self.inner.prefix
    }

    /// Sets each principal's groups (for virtual servers' access rules); a reload sets
    /// them again.
    pub fn set_groups(&self, groups: std::collections::HashMap<String, Vec<String>>) {
        self.inner.directory.set(groups);
    }

    /// What the authenticator tells of each verified JWT: its principal and groups
    /// (`groups` and `roles` claims), remembered for virtual servers' access rules.
    pub fn groups_sink(&self) -> crate::virtuals::GroupsSink {
        let inner = self.inner.clone();
        Arc::new(move |principal, groups| inner.directory.learn(principal, groups))
    }

    /// The metrics.
    pub fn metrics(&self) -> &Metrics {
        &self.inner.metrics
    }

    /// Registers the metrics in `registry`.
    pub fn register_metrics(&self, registry: &mut Registry) {
        self.inner.metrics.register(registry);
    }

    /// Brings gauges that are read from elsewhere up to date (call before rendering).
    pub fn refresh_gauges(&self) {
        self.inner
            .metrics
            .stdio_children
            .set(self.inner.connector.stdio_children());
    }

    /// Live sessions.
    pub fn len(&self) -> usize {
        self.inner.map.len()
    }

    /// Whether no session is live.
    pub fn is_empty(&self) -> bool {
        self.inner.map.is_empty()
    }

    /// Stops accepting new sessions (the start of a drain).
    pub fn stop_accepting(&self) {
        self.inner.accepting.store(false, Ordering::Release);
    }

    /// Requests in flight over every session.
    pub fn inflight(&self) -> usize {
        self.inner.map.iter().map(|e| e.value().inflight()).sum()
    }

    /// Whether new sessions are accepted (false once shutdown started).
    pub fn is_accepting(&self) -> bool {
        self.inner.accepting.load(Ordering::Acquire)
    }

    /// Looks a session up. The map guard is dropped before this returns.
    pub fn get(&self, id: &str) -> Option<Arc<Session>> {
        self.inner.map.get(id).map(|s| s.value().clone())
    }

    /// Every live session (a snapshot).
    pub fn sessions(&self) -> Vec<Arc<Session>> {
        self.inner.map.iter().map(|e| e.value().clone()).collect()
    }

    /// Creates a session with its own dedicated upstream session. When the gateway is full
    /// (`max_sessions`, or the stdio children limit for a stdio server), the longest-idle
    /// session that may be evicted — its server allows it, nothing in flight, no open
    /// stream — is ended through the teardown path (reason `evicted`) to make room; with
    /// none, the newcomer is refused.
    pub async fn create(
        &self,
        server: &ServerSpec,
        front: FrontKind,
        principal: Option<Arc<str>>,
    ) -> Result<Arc<Session>, SessionError> {
        self.create_with(server, front, principal, How::Plain).await
    }

    /// As [`SessionTable::create`], for a session-era client of a server that speaks
    /// only 2026-07-28: the session's upstream is the era bridge's, which holds the
    /// session itself (`mcpgate_upstream::Connector::open_bridged`).
    pub async fn create_bridged(
        &self,
        server: &ServerSpec,
        front: FrontKind,
        principal: Option<Arc<str>>,
    ) -> Result<Arc<Session>, SessionError> {
        self.create_with(server, front, principal, How::Bridged)
            .await
    }

    async fn create_with(
        &self,
        server: &ServerSpec,
        front: FrontKind,
        principal: Option<Arc<str>>,
        how: How,
    ) -> Result<Arc<Session>, SessionError> {
        let mut tries = 0;
        loop {
            let full = match self.try_create(server, front, principal.clone(), how.clone()) {
                Err(SessionError::TooManySessions) => Full::Sessions,
                Err(SessionError::Upstream(mcpgate_upstream::UpstreamError::Capacity(_))) => {
                    Full::Children
                }
                other => return other,
            };
            tries += 1;
            let victim = (tries <= 3).then(|| self.eviction_victim(full)).flatten();
            let Some(victim) = victim else {
                return self.try_create(server, front, principal, how);
            };
            info!(session = %victim.tag(), server = %victim.server(), idle = ?victim.idle_for(), newcomer = %server.name, "gateway full: evicting the longest-idle session");
            victim.close(CloseReason::Evicted).await;
        }
    }

    /// The session to evict: the longest-idle one whose server allows it, with nothing in
    /// flight and no open stream (a stdio one when children are what is missing).
    pub(crate) fn eviction_victim(&self, full: Full) -> Option<Arc<Session>> {
        let now = self.inner.now_ms();
        self.inner
            .map
            .iter()
            .filter(|e| {
                let s = e.value();
                s.evict_idle && (full == Full::Sessions || s.holds_children()) && s.is_evictable()
            })
            .max_by_key(|e| now.saturating_sub(e.value().last_active_ms()))
            .map(|e| e.value().clone())
    }

    pub(crate) fn try_create(
        &self,
        server: &ServerSpec,
        front: FrontKind,
        principal: Option<Arc<str>>,
        how: How,
    ) -> Result<Arc<Session>, SessionError> {
        let inner = &self.inner;
        if !self.is_accepting() {
            return Err(SessionError::ShuttingDown);
        }
        if inner.map.len() >= inner.cfg.max_sessions {
            return Err(SessionError::TooManySessions);
        }
        // Reserve the principal's slot first; it is given back if anything below fails
        // (and at teardown).
        let slot = match &principal {
            Some(p) => {
                let mut n = inner.per_principal.entry(p.clone()).or_insert(0);
                if *n >= inner.cfg.max_sessions_per_principal {
                    return Err(SessionError::TooManySessionsForPrincipal);
                }
                *n += 1;
                Some(PrincipalSlot {
                    table: inner,
                    principal: p.clone(),
                    armed: true,
                })
            }
            None => None,
        };
        let id: Arc<str> = match &how {
            How::Resume(sid, _) => sid.clone(),
            _ => Arc::from(mint_id(&inner.prefix)),
        };
        let cancel = inner.root.child_token();
        let tag = crate::shared::short_id(&id).to_owned();
        let router = Arc::new(std::sync::Mutex::new(Router::new(
            inner.cfg.backlog,
            inner.cfg.backlog_bytes,
        )));
        let sink = Arc::new(Sink::new(router.clone(), &tag, inner.metrics.clone()));
        let sealable = front == FrontKind::StreamableHttp
            && matches!(server.target, mcpgate_upstream::Target::Http { .. })
            && inner.sealing.is_on();
        let (target, c) = (&server.target, &inner.connector);
        let resumed = matches!(how, How::Resume(..));
        let opened = match how {
            How::Bridged => c.open_bridged(target, &tag, cancel.clone(), sink.clone()),
            How::Resume(_, r) => c.open_sealed(target, &tag, cancel.clone(), sink.clone(), r),
            How::Plain if sealable => c.open_sealed(
                target,
                &tag,
                cancel.clone(),
                sink.clone(),
                Default::default(),
            ),
            How::Plain => match target {
                mcpgate_upstream::Target::Virtual(v) => crate::virtuals::open(
                    c,
                    &inner.metrics,
                    &inner.directory,
                    v,
                    crate::virtuals::Opening {
                        server: &server.name,
                        principal: principal.clone(),
                        tag: &tag,
                        cancel: cancel.clone(),
                        sink: sink.clone(),
                    },
                ),
                _ => c.open(target, &tag, cancel.clone(), sink.clone()),
            },
        };
        let upstream = opened.inspect_err(|e| {
            inner.metrics.upstream_error(e.kind());
            warn!(server = %server.name, error = %e, "cannot open upstream session");
        })?;
        let session = Arc::new(Session::new(
            id.clone(),
            server,
            (front, principal),
            upstream,
            cancel,
            router,
            inner,
        ));
        match inner.map.entry(id) {
            // A concurrent request resumed the same sealed session first: use that one;
            // this one never started anything (and its upstream is left alone).
            dashmap::Entry::Occupied(e) if !e.get().is_closing() => return Ok(e.get().clone()),
            // A closing copy (its teardown removes only itself) gives way to the resume.
            dashmap::Entry::Occupied(mut e) => {
                e.insert(session.clone());
            }
            dashmap::Entry::Vacant(v) => {
                v.insert(session.clone());
            }
        }
        if let Some(mut slot) = slot {
            slot.armed = false; // now owned by the session: released at teardown
        }
        inner.metrics.sessions_opened.inc();
        inner.metrics.sessions_active.inc();
        let origin = crate::metrics::Origin {
            server: server.name.clone(),
            front: front.as_str(),
        };
        inner.metrics.by_origin_active.get_or_create(&origin).inc();
        inner.metrics.by_origin_opened.get_or_create(&origin).inc();
        if resumed {
            info!(session = %session.tag(), server = %server.name, "sealed session resumed on this replica");
        } else {
            info!(session = %session.tag(), server = %server.name, upstream = session.upstream_kind(), pid = session.child_pid(), "session opened");
        }
        sink.attach(&session);
        Ok(session)
    }

    /// Ends the session with that id, if it exists; resolves when its teardown is done.
    pub async fn close(&self, id: &str, reason: CloseReason) -> bool {
        match self.get(id) {
            Some(s) => {
                s.close(reason).await;
                true
            }
            None => false,
        }
    }

    /// Builds what a server added by a reload needs before its first session (see
    /// [`mcpgate_upstream::Connector::prepare`]) and shows its configured era.
    pub fn add_server(&self, server: &ServerSpec) -> Result<(), mcpgate_upstream::UpstreamError> {
        self.inner.connector.prepare(&server.target)?;
        self.inner
            .metrics
            .set_era(&server.name, crate::eras::configured_era(server.protocol));
        Ok(())
    }

    /// Ends every session and pooled upstream of `server` through the teardown path
    /// (`reason`: a reload removed or changed it); waits, bounded, for their teardown.
    /// Returns how many sessions were ended.
    pub async fn close_server(&self, server: &str, reason: CloseReason) -> usize {
        let closing: Vec<_> = self
            .sessions()
            .into_iter()
            .filter(|s| s.server() == server)
            .map(|s| s.close(reason))
            .collect();
        let n = closing.len();
        let pooled: Vec<_> = self
            .inner
            .pools
            .drain_server(server)
            .into_iter()
            .map(|p| crate::pool::end(p, reason.as_str()))
            .collect();
        self.inner.eras.forget(server);
        let bound = self.inner.connector.teardown_bound() + Duration::from_secs(1);
        let all = async move {
            futures::future::join_all(closing).await;
            futures::future::join_all(pooled).await;
        };
        if tokio::time::timeout(bound, all).await.is_err() {
            warn!(
                server,
                sessions = n,
                "some sessions did not finish teardown in time"
            );
        }
        n
    }

    /// Starts the idle reaper: it closes sessions idle longer than the idle timeout.
    pub fn spawn_reaper(&self) {
        let inner = Arc::downgrade(&self.inner);
        let idle = self.inner.cfg.idle_timeout.min(self.inner.shortest_idle);
        let tick = (idle / 4).clamp(Duration::from_millis(50), Duration::from_secs(5));
        let root = self.inner.root.clone();
        self.inner.tracker.spawn(async move {
            let mut every = tokio::time::interval(tick);
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    () = root.cancelled() => return,
                    _ = every.tick() => {}
                }
                let Some(inner) = inner.upgrade() else { return };
                let now = inner.now_ms();
                let idle: Vec<Arc<Session>> = inner
                    .map
                    .iter()
                    .filter(|e| e.value().is_idle(now))
                    .map(|e| e.value().clone())
                    .collect();
                for s in idle {
                    drop(s.close(CloseReason::Idle));
                }
                let default_idle =
                    u64::try_from(inner.cfg.idle_timeout.as_millis()).unwrap_or(u64::MAX);
                let expired = inner.pools.expired(now, |server| {
                    inner.idle_ms.get(server).copied().unwrap_or(default_idle)
                });
                for p in expired {
                    inner.tracker.spawn(crate::pool::end(p, "idle"));
                }
                inner.sealing.prune();
            }
        });
    }

    /// Stops accepting sessions, lets in-flight requests finish for up to `drain`, then
    /// closes every session through the teardown path and waits (bounded) for every task.
    pub async fn shutdown(&self, drain: Duration) {
        let inner = &self.inner;
        inner.accepting.store(false, Ordering::Release);
        let until = tokio::time::Instant::now() + drain;
        while tokio::time::Instant::now() < until
            && inner.map.iter().any(|e| e.value().inflight() > 0)
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let closing: Vec<_> = self
            .sessions()
            .into_iter()
            .map(|s| s.close(CloseReason::Shutdown))
            .collect();
        let n = closing.len();
        let pooled: Vec<_> = inner
            .pools
            .drain()
            .into_iter()
            .map(|p| crate::pool::end(p, "shutdown"))
            .collect();
        // Long enough for every session's bounded teardown (a stdio child's close →
        // SIGTERM → SIGKILL, an HTTP DELETE), which run in parallel.
        let bound = inner.connector.teardown_bound() + Duration::from_secs(1);
        let closing = async move {
            futures::future::join_all(closing).await;
            futures::future::join_all(pooled).await;
        };
        if tokio::time::timeout(bound, closing).await.is_err() {
            warn!(
                sessions = n,
                "some sessions did not finish teardown in time"
            );
        }
        inner.root.cancel();
        inner.tracker.close();
        let _ = tokio::time::timeout(Duration::from_secs(2), inner.tracker.wait()).await;
        if !inner.connector.wait_tasks(Duration::from_secs(2)).await {
            warn!("some upstream tasks did not end in time");
        }
    }
}

/// How a session's upstream is opened.
#[derive(Clone)]
pub(crate) enum How {
    /// A new upstream session (sealed when sealing is on and the server is HTTP).
    Plain,
    /// The era bridge's upstream (a 2026-07-28-only server).
    Bridged,
    /// A sealed session another replica made: this id, that upstream session.
    Resume(Arc<str>, mcpgate_upstream::Resume),
}

/// What the gateway ran out of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Full {
    Sessions,
    Children,
}
