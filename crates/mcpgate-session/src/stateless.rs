//! What the table does for 2026-07-28 requests, which have no session: which era a
//! server speaks (configured, learned and cached in `eras.rs`, or asked now), and the
//! one exchange of a request to a Streamable HTTP server.

use mcpgate_upstream::{ModernRequest, ModernResponse, UpstreamError};
use tracing::{info, warn};

use crate::eras::{Era, Protocol};
use crate::error::SessionError;
use crate::spec::ServerSpec;
use crate::table::SessionTable;

impl SessionTable {
    /// The era `server` speaks, for a 2026-07-28 request: as configured; for `auto`, as
    /// learned (cached for `era_ttl`) or asked now with `server/discover` (an HTTP server;
    /// a stdio server is asked by the first child started for it, so it stays `Unknown`
    /// here). A probe that fails to reach the server leaves the era `Unknown`. A server
    /// that needs a per-user credential is asked with `principal`'s.
    pub async fn modern_era(&self, server: &ServerSpec, principal: Option<&str>) -> Era {
        if server.protocol != Protocol::Auto {
            return crate::eras::configured_era(server.protocol);
        }
        let eras = &self.inner.eras;
        let known = eras.get(&server.name);
        let target = match server.backend.target() {
            Some(t) if server.backend.is_http() && known == Era::Unknown => t,
            _ => return known,
        };
        let lock = eras.probe_lock(&server.name);
        let _probing = lock.lock().await;
        let known = eras.get(&server.name);
        if known != Era::Unknown {
            return known;
        }
        match self
            .inner
            .connector
            .transports()
            .probe(target, principal)
            .await
        {
            Ok(v) => {
                let era = match v {
                    mcpgate_upstream::Verdict::Modern => Era::Modern,
                    mcpgate_upstream::Verdict::Session => Era::Session,
                };
                self.learned(&server.name, era);
                era
            }
            Err(e) => {
                self.inner.home.rt.metrics.upstream_error(e.kind());
                warn!(server = %server.name, error = %e, "cannot ask the upstream which protocol era it speaks");
                Era::Unknown
            }
        }
    }

    /// Records what `server` was found to speak.
    pub fn learned(&self, server: &str, era: Era) {
        if self.inner.eras.get(server) != era {
            info!(server, era = era.as_str(), "upstream protocol era learned");
        }
        self.inner.eras.learn(server, era);
        self.inner.home.rt.metrics.set_era(server, era);
    }

    /// The upstream answered in a way that contradicts its cached era: forget it (the
    /// next 2026-07-28 request asks again).
    pub fn contradicted(&self, server: &ServerSpec, why: &str) {
        if server.protocol == Protocol::Auto && self.inner.eras.get(&server.name) != Era::Unknown {
            info!(server = %server.name, why, "upstream's answer contradicts its known protocol era; asking again next time");
            self.inner.eras.forget(&server.name);
            self.inner
                .home
                .rt
                .metrics
                .set_era(&server.name, Era::Unknown);
        }
    }

    /// The known era of every `auto` server that has been asked.
    pub fn learned_eras(&self) -> Vec<(String, Era)> {
        self.inner
            .eras
            .snapshot()
            .into_iter()
            .map(|(s, e)| (s.to_string(), e))
            .collect()
    }

    /// Pooled stdio children per (principal, server): (live, leased). For the admin API.
    pub fn pool_counts(&self) -> Vec<(Option<String>, String, usize, usize)> {
        self.inner
            .children
            .counts()
            .into_iter()
            .map(|(k, live, busy)| {
                (
                    k.principal.map(|p| p.to_string()),
                    k.server.to_string(),
                    live,
                    busy,
                )
            })
            .collect()
    }

    /// Forwards one 2026-07-28 request of `principal` to the Streamable HTTP server
    /// `server` on its own exchange and returns the answer as it arrives.
    pub async fn forward(
        &self,
        server: &ServerSpec,
        req: ModernRequest,
        principal: Option<&str>,
    ) -> Result<ModernResponse, SessionError> {
        let target = server.backend.target().ok_or(UpstreamError::Protocol(
            mcpgate_upstream::ProtocolError::NeedsHttp("a 2026-07-28 exchange"),
        ))?;
        Ok(self
            .inner
            .connector
            .transports()
            .forward(target, req, principal)
            .await?)
    }
}
