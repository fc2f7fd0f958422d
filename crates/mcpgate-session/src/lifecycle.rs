//! The table over time: closing one session or every session of a server, the idle
//! reaper, and the drain at shutdown. Every session ends through [`crate::Session::close`].

use std::sync::Arc;
use std::time::Duration;

use tracing::warn;

use crate::children;
use crate::kinds::CloseReason;
use crate::spec::ServerSpec;
use crate::table::SessionTable;

impl SessionTable {
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
    /// [`mcpgate_compose::Connector::prepare`]) and shows its configured era.
    pub fn add_server(&self, server: &ServerSpec) -> Result<(), mcpgate_upstream::UpstreamError> {
        self.inner.connector.prepare(&server.backend)?;
        self.inner
            .home
            .rt
            .metrics
            .set_era(&server.name, crate::eras::configured_era(server.protocol));
        Ok(())
    }

    /// The stdio commands whose children keep failing to start, with their backoff and
    /// the last child's status and stderr (for the admin API).
    pub fn failing_starts(&self) -> Vec<(Vec<String>, mcpgate_child::Standing)> {
        self.inner.connector.transports().failing_starts()
    }

    /// Ends the warm stdio children of every target no server of `servers` uses any more
    /// (a reload removed or changed it); those still used keep theirs.
    pub fn keep_warm_only(&self, servers: &[ServerSpec]) {
        let backends: Vec<_> = servers.iter().map(|s| &s.backend).collect();
        self.inner.connector.keep_warm_only(&backends);
    }

    /// The longest the teardown of every session takes, they run in parallel.
    fn teardown_bound(&self) -> Duration {
        self.inner.connector.transports().teardown_bound() + Duration::from_secs(1)
    }

    /// Ends every session and pooled child of `server` through the teardown path
    /// (`reason`: a reload removed or changed it); waits, bounded, for their teardown.
    /// Returns how many sessions were ended.
    pub async fn close_server(&self, server: &str, reason: CloseReason) -> usize {
        let closing: Vec<_> = self
            .inner
            .home
            .sessions
            .filtered(|s| s.server() == server)
            .into_iter()
            .map(|s| s.close(reason))
            .collect();
        let n = closing.len();
        let pooled: Vec<_> = self
            .inner
            .children
            .drain(|k| &*k.server == server)
            .into_iter()
            .map(|c| children::end(c, reason.as_str()))
            .collect();
        self.inner.eras.forget(server);
        let all = async move {
            futures::future::join_all(closing).await;
            futures::future::join_all(pooled).await;
        };
        if tokio::time::timeout(self.teardown_bound(), all)
            .await
            .is_err()
        {
            warn!(
                server,
                sessions = n,
                "some sessions did not finish teardown in time"
            );
        }
        n
    }

    /// Starts the idle reaper: it closes sessions idle longer than their idle timeout and
    /// ends pooled children unused for as long.
    pub fn spawn_reaper(&self) {
        let inner = Arc::downgrade(&self.inner);
        let cfg = &self.inner.home.rt.cfg;
        let idle = cfg.idle_timeout.min(self.inner.shortest_idle());
        let tick = (idle / 4).clamp(Duration::from_millis(50), Duration::from_secs(5));
        let root = self.inner.home.rt.root.clone();
        self.inner.home.rt.tracker.spawn(async move {
            let mut every = tokio::time::interval(tick);
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    () = root.cancelled() => return,
                    _ = every.tick() => {}
                }
                let Some(inner) = inner.upgrade() else { return };
                SessionTable { inner }.reap();
            }
        });
    }

    /// One round of the reaper.
    fn reap(&self) {
        let home = &self.inner.home;
        let now = home.rt.now_ms();
        for s in home.sessions.filtered(|s| s.is_idle(now)) {
            drop(s.close(CloseReason::Idle));
        }
        for c in self
            .inner
            .children
            .expired(|k| self.inner.idle_ms(&k.server))
        {
            home.rt.tracker.spawn(children::end(c, "idle"));
        }
        // The bridge's sessions idle out as sessions; the pool forgets the ended ones.
        drop(self.inner.bridges.expired(|_| u64::MAX));
        home.rt.sealer.prune();
    }

    /// Stops accepting sessions, lets in-flight requests finish for up to `drain`, then
    /// closes every session through the teardown path and waits (bounded) for every task.
    pub async fn shutdown(&self, drain: Duration) {
        let home = &self.inner.home;
        home.sessions.stop_accepting();
        let until = tokio::time::Instant::now() + drain;
        while tokio::time::Instant::now() < until && self.inflight() > 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let closing: Vec<_> = self
            .sessions()
            .into_iter()
            .map(|s| s.close(CloseReason::Shutdown))
            .collect();
        let n = closing.len();
        let pooled: Vec<_> = self
            .inner
            .children
            .drain(|_| true)
            .into_iter()
            .map(|c| children::end(c, "shutdown"))
            .collect();
        // Long enough for every session's bounded teardown (a stdio child's close →
        // SIGTERM → SIGKILL, an HTTP DELETE), which run in parallel.
        let closing = async move {
            futures::future::join_all(closing).await;
            futures::future::join_all(pooled).await;
        };
        if tokio::time::timeout(self.teardown_bound(), closing)
            .await
            .is_err()
        {
            warn!(
                sessions = n,
                "some sessions did not finish teardown in time"
            );
        }
        home.rt.root.cancel();
        home.rt.tracker.close();
        let _ = tokio::time::timeout(Duration::from_secs(2), home.rt.tracker.wait()).await;
        let transports = self.inner.connector.transports();
        // The warm children go too (their groups killed), so the sampler has nothing
        // left to watch and ends with the other upstream tasks.
        transports.keep_warm_only(&[]);
        if !transports.wait_tasks(Duration::from_secs(2)).await {
            warn!("some upstream tasks did not end in time");
        }
    }
}
