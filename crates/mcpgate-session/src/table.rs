//! The session table: a small handle over the parts that hold sessions and what stands in
//! for them — the session store and runtime (`Home`), the connector, the era cache, the
//! keyed pool of stdio children and the pool of the era bridge's sessions, the directory
//! of principals' groups. Sessions are found, created and counted only here.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use mcpgate_compose::{Backend, Mode};
use mcpgate_upstream::UpstreamError;
use prometheus_client::registry::Registry;
use tracing::{info, warn};

use crate::bridge_pool::{BridgeKey, BridgeSession};
use crate::children::{Child, PoolKey};
use crate::config::SessionConfig;
use crate::directory::Directory;
use crate::eras::Eras;
use crate::error::SessionError;
use crate::kinds::{CloseReason, FrontKind};
use crate::metrics::Metrics;
use crate::pool::{Pool, Shape};
use crate::router::Router;
use crate::runtime::Runtime;
use crate::session::{Home, Session};
use crate::sink::Sink;
use crate::spec::ServerSpec;
use crate::store::{Placed, Store};

/// The concurrent table of live sessions. Cheap to clone; every clone is the same table.
#[derive(Clone)]
pub struct SessionTable {
    pub(crate) inner: Arc<Parts>,
}

/// What the table is made of, each part with one job.
pub(crate) struct Parts {
    /// The live sessions and what they run with.
    pub(crate) home: Arc<Home>,
    /// Opens sessions' upstreams.
    pub(crate) connector: mcpgate_compose::Connector,
    /// What each server's protocol era is known to be.
    pub(crate) eras: Eras,
    /// stdio children leased per request (2026-07-28 toward stdio servers).
    pub(crate) children: Arc<Pool<PoolKey, Child>>,
    /// The era bridge's upstream sessions (2026-07-28 clients of session-era servers).
    pub(crate) bridges: Arc<Pool<BridgeKey, BridgeSession>>,
    /// Principals' groups, for virtual servers' access rules.
    pub(crate) directory: Directory,
    /// Idle timeout per server, in ms (pooled children idle out by it).
    idle_ms: HashMap<String, u64>,
    /// The shortest idle timeout of any server (the reaper's tick follows it).
    shortest_idle: Duration,
}

/// Who keeps a new session's state upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holder {
    /// The server: the session is its own (the session era).
    Server,
    /// The gateway: the server speaks only 2026-07-28, and the era bridge holds the
    /// session-era client's session in front of it.
    Gateway,
}

/// How a session's upstream is opened.
pub(crate) enum How {
    /// A new session, held as said.
    New(Holder),
    /// A sealed session another replica made: this id, that upstream session.
    Resume(Arc<str>, mcpgate_upstream::Resume),
}

/// What the gateway ran out of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Full {
    Sessions,
    Children,
}

impl Parts {
    /// The idle timeout of `server`'s pooled children, in ms.
    pub(crate) fn idle_ms(&self, server: &str) -> u64 {
        self.idle_ms
            .get(server)
            .copied()
            .unwrap_or_else(|| millis(self.home.rt.cfg.idle_timeout))
    }

    /// The shortest idle timeout of any server.
    pub(crate) fn shortest_idle(&self) -> Duration {
        self.shortest_idle
    }
}

impl std::fmt::Debug for SessionTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionTable")
            .field("sessions", &self.len())
            .finish()
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl SessionTable {
    /// An empty table. `id_prefix` is put in front of every minted id; `servers` are the
    /// configured servers (their idle timeouts set the reaper's pace).
    pub fn new(
        connector: mcpgate_upstream::Connector,
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
        let idle_ms = servers
            .iter()
            .map(|s| {
                (
                    s.name.clone(),
                    millis(s.idle_timeout.unwrap_or(cfg.idle_timeout)),
                )
            })
            .collect();
        let one_shared = Shape {
            per_key: 1,
            exclusive: false,
        };
        let bridge_shape = Shape {
            per_key: cfg.bridge_sessions,
            exclusive: true,
        };
        let parts = Parts {
            children: Arc::new(Pool::new(one_shared, cfg.lease_wait)),
            bridges: Arc::new(Pool::new(bridge_shape, cfg.lease_wait)),
            eras: Eras::new(cfg.era_ttl),
            home: Arc::new(Home {
                sessions: Store::new(id_prefix, cfg.max_sessions, cfg.max_sessions_per_principal),
                rt: Runtime::new(cfg, metrics),
            }),
            connector: mcpgate_compose::Connector::new(connector),
            directory: Directory::default(),
            idle_ms,
            shortest_idle,
        };
        SessionTable {
            inner: Arc::new(parts),
        }
    }

    fn rt(&self) -> &Runtime {
        &self.inner.home.rt
    }

    /// The prefix of every id this table mints (the replica's).
    pub fn id_prefix(&self) -> &str {
        self.inner.home.sessions.prefix()
    }

    /// Sets each principal's groups (for virtual servers' access rules); a reload sets
    /// them again.
    pub fn set_groups(&self, groups: HashMap<String, Vec<String>>) {
        self.inner.directory.set(groups);
    }

    /// What the authenticator tells of each verified JWT: its principal and groups
    /// (`groups` and `roles` claims), remembered for virtual servers' access rules.
    pub fn groups_sink(&self) -> crate::directory::GroupsSink {
        let inner = self.inner.clone();
        Arc::new(move |principal, groups| inner.directory.learn(principal, groups))
    }

    /// The metrics.
    pub fn metrics(&self) -> &Metrics {
        &self.rt().metrics
    }

    /// Registers the metrics in `registry`.
    pub fn register_metrics(&self, registry: &mut Registry) {
        self.rt().metrics.register(registry);
    }

    /// Brings gauges that are read from elsewhere up to date (call before rendering).
    pub fn refresh_gauges(&self) {
        let children = self.inner.connector.transports().stdio_children();
        self.rt().metrics.stdio_children.set(children);
    }

    /// Live sessions.
    pub fn len(&self) -> usize {
        self.inner.home.sessions.len()
    }

    /// Whether no session is live.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Stops accepting new sessions (the start of a drain).
    pub fn stop_accepting(&self) {
        self.inner.home.sessions.stop_accepting();
    }

    /// Requests in flight over every session.
    pub fn inflight(&self) -> usize {
        self.inner.home.sessions.sum(Session::inflight)
    }

    /// Whether new sessions are accepted (false once shutdown started).
    pub fn is_accepting(&self) -> bool {
        self.inner.home.sessions.is_accepting()
    }

    /// Looks a session up. The map guard is dropped before this returns.
    pub fn get(&self, id: &str) -> Option<Arc<Session>> {
        self.inner.home.sessions.get(id)
    }

    /// Every live session (a snapshot).
    pub fn sessions(&self) -> Vec<Arc<Session>> {
        self.inner.home.sessions.all()
    }

    /// Creates a session with its own dedicated upstream session, held as `holder` says.
    /// When the gateway is full (`max_sessions`, or the stdio children limit for a stdio
    /// server), the longest-idle session that may be evicted — its server allows it,
    /// nothing in flight, no open stream — is ended through the teardown path (reason
    /// `evicted`) to make room; with none, the newcomer is refused.
    pub async fn create(
        &self,
        server: &ServerSpec,
        front: FrontKind,
        principal: Option<Arc<str>>,
        holder: Holder,
    ) -> Result<Arc<Session>, SessionError> {
        let mut tries = 0;
        loop {
            let how = How::New(holder);
            let full = match self.try_create(server, front, principal.clone(), how) {
                Err(SessionError::TooManySessions) => Full::Sessions,
                Err(SessionError::Upstream(UpstreamError::Capacity(_))) => Full::Children,
                other => return other,
            };
            tries += 1;
            let victim = (tries <= 3).then(|| self.eviction_victim(full)).flatten();
            let Some(victim) = victim else {
                return self.try_create(server, front, principal, How::New(holder));
            };
            info!(session = %victim.tag(), server = %victim.server(), idle = ?victim.idle_for(), newcomer = %server.name, "gateway full: evicting the longest-idle session");
            victim.close(CloseReason::Evicted).await;
        }
    }

    /// The session to evict: the longest-idle one whose server allows it, with nothing in
    /// flight and no open stream (a stdio one when children are what is missing).
    pub(crate) fn eviction_victim(&self, full: Full) -> Option<Arc<Session>> {
        let now = self.rt().now_ms();
        self.inner.home.sessions.max_by(
            |s| s.evict_idle && (full == Full::Sessions || s.holds_children()) && s.is_evictable(),
            |s| now.saturating_sub(s.last_active_ms()),
        )
    }

    /// How the upstream of a new session of `server` is opened: the plan of its opening.
    fn mode(&self, server: &ServerSpec, front: FrontKind, how: How) -> (Option<Arc<str>>, Mode) {
        match how {
            How::Resume(id, r) => (Some(id), Mode::Sealed(r)),
            How::New(Holder::Gateway) => (None, Mode::Reverse),
            How::New(Holder::Server)
                if front == FrontKind::StreamableHttp
                    && server.backend.is_http()
                    && self.rt().sealer.is_on() =>
            {
                (None, Mode::Sealed(Default::default()))
            }
            How::New(Holder::Server) => (None, Mode::Fresh),
        }
    }

    /// What a new session's upstream is opened with.
    fn opening(
        &self,
        server: &ServerSpec,
        principal: Option<&str>,
        base: mcpgate_upstream::Opening,
    ) -> mcpgate_compose::Opening {
        let events: Option<Arc<dyn mcpgate_compose::MemberEvents>> = match &server.backend {
            Backend::Virtual(_) => Some(Arc::new(crate::virtuals::Events {
                server: server.name.clone(),
                metrics: self.rt().metrics.clone(),
            })),
            Backend::Server(_) => None,
        };
        let who = match &server.backend {
            Backend::Virtual(_) => self.inner.directory.who(principal),
            Backend::Server(_) => mcpgate_virtual::Who {
                principal: principal.map(str::to_owned),
                groups: Vec::new(),
            },
        };
        mcpgate_compose::Opening {
            session: base,
            who,
            events,
        }
    }

    pub(crate) fn try_create(
        &self,
        server: &ServerSpec,
        front: FrontKind,
        principal: Option<Arc<str>>,
        how: How,
    ) -> Result<Arc<Session>, SessionError> {
        let home = &self.inner.home;
        // Reserve the principal's slot first; it is given back if anything below fails
        // (and at teardown).
        let slot = home.sessions.reserve(principal.as_ref())?;
        let resumed = matches!(how, How::Resume(..));
        let (id, mode) = self.mode(server, front, how);
        let id = id.unwrap_or_else(|| home.sessions.mint());
        let cancel = home.rt.root.child_token();
        let tag = crate::store::short_id(&id).to_owned();
        let cfg = &home.rt.cfg;
        let router = Arc::new(std::sync::Mutex::new(Router::new(
            cfg.backlog,
            cfg.backlog_bytes,
        )));
        let sink = Arc::new(Sink::new(router.clone(), &tag, home.rt.metrics.clone()));
        let base = mcpgate_upstream::Opening::new(&tag, cancel.clone(), sink.clone())
            .for_principal(principal.clone());
        let opening = self.opening(server, principal.as_deref(), base);
        let upstream = self
            .inner
            .connector
            .open(&server.backend, mode, opening)
            .inspect_err(|e| {
                home.rt.metrics.upstream_error(e.kind());
                warn!(server = %server.name, error = %e, "cannot open upstream session");
            })?;
        let session = Arc::new(Session::new(
            id.clone(),
            server,
            (front, principal),
            (upstream, cancel, router),
            home,
        ));
        // A concurrent request resumed the same sealed session first: use that one; this
        // one never started anything (and its upstream is left alone).
        if let Placed::Existing(s) = home.sessions.place(id, &session, Session::is_closing) {
            return Ok(s);
        }
        slot.keep();
        self.count_open(server, front);
        if resumed {
            info!(session = %session.tag(), server = %server.name, "sealed session resumed on this replica");
        } else {
            info!(session = %session.tag(), server = %server.name, upstream = session.upstream_kind(), pid = session.child_pid(), "session opened");
        }
        sink.attach(&session);
        Ok(session)
    }

    fn count_open(&self, server: &ServerSpec, front: FrontKind) {
        let m = &self.rt().metrics;
        m.sessions_opened.inc();
        m.sessions_active.inc();
        let origin = crate::metrics::Origin {
            server: server.name.clone(),
            front: front.as_str(),
        };
        m.by_origin_active.get_or_create(&origin).inc();
        m.by_origin_opened.get_or_create(&origin).inc();
    }
}
