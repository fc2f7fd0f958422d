//! Connection limits: a total cap, a cap per client address, and a reserve.
//!
//! Every accepted connection takes a [`Slot`] (given back on drop). Beyond the total cap
//! or the client's own cap a connection is answered `503` and closed at once, before it
//! can hold a file descriptor for long. The last `reserve` slots below the total cap are
//! *reserve* connections: they serve only what must keep working when the gateway is
//! crowded — `/healthz`, `/readyz`, `/metrics` and requests of sessions that already exist
//! — and answer anything else `503` (the front checks [`Slot::is_reserve`]).

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use dashmap::DashMap;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// The caps. `0` for `per_client` means no per-client cap.
#[derive(Debug, Clone, Copy)]
pub struct ConnLimits {
    /// Connections open at once.
    pub max: usize,
    /// Connections open at once from one client address.
    pub per_client: usize,
    /// Slots below `max` kept for health probes and existing sessions.
    pub reserve: usize,
}

impl Default for ConnLimits {
    fn default() -> Self {
        ConnLimits {
            max: 4096,
            per_client: 512,
            reserve: 64,
        }
    }
}

/// Why a connection or request was turned away, for the metric's label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct Refusal {
    pub(crate) reason: &'static str,
}

/// Counts connections; one per front listener.
#[derive(Debug)]
pub(crate) struct Connections {
    limits: ConnLimits,
    open: AtomicUsize,
    per_client: DashMap<IpAddr, usize>,
    gauge: Gauge,
    pub(crate) refused: Family<Refusal, Counter>,
    pub(crate) timeouts: Family<Refusal, Counter>,
}

/// A connection's place; given back when dropped.
#[derive(Debug)]
pub(crate) struct Slot {
    conns: Arc<Connections>,
    ip: IpAddr,
    reserve: bool,
}

impl Slot {
    /// Whether this connection may only serve probes and existing sessions.
    pub(crate) fn is_reserve(&self) -> bool {
        self.reserve
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.conns.open.fetch_sub(1, Ordering::AcqRel);
        self.conns.gauge.dec();
        if self.conns.limits.per_client > 0 {
            let empty = match self.conns.per_client.get_mut(&self.ip) {
                Some(mut n) => {
                    *n = n.saturating_sub(1);
                    *n == 0
                }
                None => false,
            };
            if empty {
                self.conns.per_client.remove_if(&self.ip, |_, n| *n == 0);
            }
        }
    }
}

impl Connections {
    pub(crate) fn new(limits: ConnLimits) -> Arc<Self> {
        Arc::new(Connections {
            limits,
            open: AtomicUsize::new(0),
            per_client: DashMap::new(),
            gauge: Gauge::default(),
            refused: Family::default(),
            timeouts: Family::default(),
        })
    }

    pub(crate) fn register(&self, registry: &mut Registry) {
        registry.register(
            "mcpgate_connections_open",
            "Client connections open",
            self.gauge.clone(),
        );
        registry.register(
            "mcpgate_connections_refused",
            "Client connections or requests turned away, by reason (max_connections, per_client, reserve, tls)",
            self.refused.clone(),
        );
        registry.register(
            "mcpgate_request_timeouts",
            "Requests whose body did not arrive in time (answered 408)",
            self.timeouts.clone(),
        );
    }

    /// A slot for a new connection from `ip`, or why there is none.
    pub(crate) fn admit(self: &Arc<Self>, ip: IpAddr) -> Result<Slot, &'static str> {
        let l = self.limits;
        let n = self.open.fetch_add(1, Ordering::AcqRel);
        if n >= l.max {
            self.open.fetch_sub(1, Ordering::AcqRel);
            return Err("max_connections");
        }
        if l.per_client > 0 {
            let mut c = self.per_client.entry(ip).or_insert(0);
            if *c >= l.per_client {
                drop(c);
                self.open.fetch_sub(1, Ordering::AcqRel);
                return Err("per_client");
            }
            *c += 1;
        }
        self.gauge.inc();
        Ok(Slot {
            conns: self.clone(),
            ip,
            reserve: n >= l.max.saturating_sub(l.reserve),
        })
    }

    pub(crate) fn refused(&self, reason: &'static str) {
        self.refused.get_or_create(&Refusal { reason }).inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_and_reserve() {
        let c = Connections::new(ConnLimits {
            max: 4,
            per_client: 3,
            reserve: 1,
        });
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let s1 = c.admit(a).unwrap();
        let _s2 = c.admit(a).unwrap();
        let _s3 = c.admit(a).unwrap();
        assert!(!s1.is_reserve());
        assert_eq!(c.admit(a).unwrap_err(), "per_client");
        let s4 = c.admit(b).unwrap();
        assert!(s4.is_reserve(), "the last slot is a reserve slot");
        assert_eq!(c.admit(b).unwrap_err(), "max_connections");
        drop(s1);
        assert!(c.admit(a).is_ok(), "a freed slot is reusable");
    }
}
