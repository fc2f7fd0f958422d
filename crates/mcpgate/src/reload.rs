//! SIGHUP: reload the configuration file and the listeners' TLS files.
//!
//! The file is read and checked exactly as at start (`--check-config` is the same
//! validation); an invalid file is refused with a log line and the running configuration
//! keeps serving. What a reload applies: servers added, removed or changed (the sessions
//! of removed and changed servers end with reason `config_reload`; the others are kept),
//! authentication (static tokens, JWT settings), the rate limit, and the seal keys. Other
//! settings (listen address, TLS file paths, timeouts, session limits, the admin listener,
//! the replica id, `[telemetry]`) need a restart: a reload that changes them says so in its log line and
//! applies the rest.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

use crate::config::{Config, RawConfig};

/// What a reload re-reads, and what it needs to tell what changed.
pub(crate) struct Reloader {
    /// The configuration file (`None`: the gateway was started from the command line,
    /// and only the TLS files reload).
    pub(crate) path: Option<PathBuf>,
    /// `--listen`, which overrides the file's address.
    pub(crate) listen: Option<String>,
    pub(crate) front: Arc<mcpgate_server::Front>,
    pub(crate) tls: Vec<Arc<mcpgate_tls::ServerTls>>,
    /// The settings only a restart applies, as they were at start.
    pub(crate) restart_only: String,
}

/// The settings only a restart applies, in one comparable string.
pub(crate) fn restart_only(c: &Config) -> String {
    let f = &c.front;
    format!(
        "listen {:?}; tls {:?}; session {:?}; timeouts {:?}; max_line {}; children {} {:?}; \
         replica {:?}; admin {:?}; body {} keep_alive {:?} drain {:?} header {:?} \
         body_timeout {:?} connections {:?} inflight {} input {:?} access {:?} telemetry {:?}",
        c.listen,
        c.tls,
        c.session,
        c.timeouts,
        c.max_line,
        c.max_stdio_children,
        c.cgroups.as_ref().map(|g| g.root()),
        c.id_prefix,
        c.admin.as_ref().map(|a| a.addr),
        f.max_body,
        f.keep_alive,
        f.drain,
        f.header_timeout,
        f.body_timeout,
        f.connections,
        f.modern_inflight,
        f.input_wait,
        f.access,
        c.telemetry,
    )
}

impl Reloader {
    fn load(&self) -> anyhow::Result<Option<Config>> {
        let Some(path) = &self.path else {
            return Ok(None);
        };
        let mut raw = RawConfig::load(path)?;
        if let Some(addr) = &self.listen {
            raw.set_listen(addr.clone());
        }
        raw.validate().map(Some)
    }

    /// One reload: the TLS files, then the configuration file.
    pub(crate) async fn reload(&mut self) {
        for l in &self.tls {
            if let Err(e) = l.reload(true) {
                error!(error = %e, "TLS reload refused; still serving the previous certificate");
            }
        }
        let config = match self.load() {
            Ok(Some(c)) => c,
            Ok(None) => return,
            Err(e) => {
                error!(
                    error = format!("{e:#}"),
                    "configuration reload refused; the previous configuration keeps serving"
                );
                return;
            }
        };
        if let Err(e) = self.apply(config).await {
            error!(
                error = format!("{e:#}"),
                "configuration reload refused; the previous configuration keeps serving"
            );
        }
    }

    async fn apply(&mut self, mut c: Config) -> anyhow::Result<()> {
        for w in &c.warnings {
            warn!("{w}");
        }
        let needs_restart = restart_only(&c) != self.restart_only;
        let seal_keys = c.seal_keys.take();
        let lifetime = c.sealed_stateless_lifetime;
        self.front.table().set_groups(std::mem::take(&mut c.groups));
        let done = self
            .front
            .reload(
                c.servers,
                c.default_server.as_deref(),
                c.front.auth,
                c.front.rate_limit,
            )
            .await
            .context("servers and authentication")?;
        let sealing = seal_keys
            .as_ref()
            .map(|r| r.key_ids().collect::<Vec<_>>().join(","));
        self.front.table().set_seal_keys(seal_keys, lifetime);
        info!(
            added = ?done.added,
            removed = ?done.removed,
            changed = ?done.changed,
            sessions_ended = done.sessions_ended,
            seal_keys = sealing.as_deref().unwrap_or(""),
            "configuration reloaded"
        );
        if needs_restart {
            warn!(
                "the new configuration also changes settings only a restart applies (listen address, TLS files, timeouts, session limits, admin, replica id, telemetry): those keep their old values until then"
            );
        }
        Ok(())
    }
}

/// Reloads on every SIGHUP until `stop` is cancelled.
pub(crate) async fn on_sighup(mut r: Reloader, stop: CancellationToken) {
    use tokio::signal::unix::{SignalKind, signal};
    let Ok(mut hup) = signal(SignalKind::hangup()) else {
        warn!("cannot install the SIGHUP handler");
        return;
    };
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            s = hup.recv() => if s.is_none() { return },
        }
        info!("SIGHUP: reloading the configuration and TLS certificates");
        r.reload().await;
    }
}
