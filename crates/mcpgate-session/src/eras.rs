//! Which protocol era each upstream server speaks: configured (`protocol = "2025-11-25"` or
//! `"2026-07-28"`), or, for `"auto"`, learned by asking it (`server/discover`) and cached
//! for a bounded time. A cached verdict is forgotten when the server answers in a way that
//! contradicts it, so the next request asks again.

use std::sync::Arc;
use std::time::{Duration, Instant};

use dashmap::DashMap;

/// What the configuration says about a server's era.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Protocol {
    /// Find out (`server/discover`), and remember for a while.
    #[default]
    Auto,
    /// The session era only (`initialize`, `Mcp-Session-Id`).
    Session,
    /// 2026-07-28 (sessionless).
    Modern,
}

/// A server's era, as far as the gateway knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    /// Sessions: `initialize`, `Mcp-Session-Id`.
    Session,
    /// 2026-07-28.
    Modern,
    /// Not known yet (an `auto` server nobody asked, or whose answer expired).
    Unknown,
}

impl Era {
    /// The label used in metrics, logs and the admin API.
    pub fn as_str(self) -> &'static str {
        match self {
            Era::Session => "2025",
            Era::Modern => "2026",
            Era::Unknown => "unknown",
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Known {
    era: Era,
    at: Instant,
}

/// The learned eras of `auto` servers. Reads are a shard lookup; writes happen once per
/// verdict.
#[derive(Debug)]
pub(crate) struct Eras {
    by_server: DashMap<Arc<str>, Known>,
    ttl: Duration,
    /// Serialises probes per server so a burst of first requests asks once.
    probing: DashMap<Arc<str>, Arc<tokio::sync::Mutex<()>>>,
}

impl Eras {
    pub(crate) fn new(ttl: Duration) -> Self {
        Eras {
            by_server: DashMap::new(),
            ttl,
            probing: DashMap::new(),
        }
    }

    /// The cached era of `server` (`Unknown` when never learned or expired).
    pub(crate) fn get(&self, server: &str) -> Era {
        match self.by_server.get(server) {
            Some(k) if k.at.elapsed() < self.ttl => k.era,
            _ => Era::Unknown,
        }
    }

    pub(crate) fn learn(&self, server: &str, era: Era) {
        self.by_server.insert(
            Arc::from(server),
            Known {
                era,
                at: Instant::now(),
            },
        );
    }

    pub(crate) fn forget(&self, server: &str) {
        self.by_server.remove(server);
    }

    /// The lock a probe of `server` holds (an async mutex: it is held across the probe).
    pub(crate) fn probe_lock(&self, server: &str) -> Arc<tokio::sync::Mutex<()>> {
        self.probing
            .entry(Arc::from(server))
            .or_default()
            .value()
            .clone()
    }

    /// Every learned era (for the admin API and metrics).
    pub(crate) fn snapshot(&self) -> Vec<(Arc<str>, Era)> {
        self.by_server
            .iter()
            .map(|e| {
                let era = if e.value().at.elapsed() < self.ttl {
                    e.value().era
                } else {
                    Era::Unknown
                };
                (e.key().clone(), era)
            })
            .collect()
    }
}

/// The era a server is known to speak from its configuration alone.
pub(crate) fn configured_era(p: Protocol) -> Era {
    match p {
        Protocol::Auto => Era::Unknown,
        Protocol::Session => Era::Session,
        Protocol::Modern => Era::Modern,
    }
}
