//! What every session of a gateway shares, through one strong handle: the session map
//! and per-principal counts, the connector, metrics, the task tracker and root token, the
//! configuration, the clock, the learned eras and the pooled upstreams. Sessions hold an
//! `Arc<Shared>` (no `Weak` to upgrade on every request); the map's entries are removed
//! by the teardown path, which ends the reference cycle.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use dashmap::DashMap;
use mcpgate_upstream::Connector;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::SessionConfig;
use crate::eras::Eras;
use crate::metrics::Metrics;
use crate::pool::Pools;

/// The shared state (see the module docs); `S` is the session type (generic so that this
/// module, which the session module uses, does not use it back).
pub(crate) struct Shared<S> {
    pub(crate) map: DashMap<Arc<str>, Arc<S>>,
    /// Live sessions per principal (only principals with at least one).
    pub(crate) per_principal: DashMap<Arc<str>, usize>,
    pub(crate) connector: Connector,
    pub(crate) metrics: Arc<Metrics>,
    /// Owns every task a session starts (session tasks, teardowns, the reaper).
    pub(crate) tracker: TaskTracker,
    /// Parent of every session's token.
    pub(crate) root: CancellationToken,
    pub(crate) cfg: SessionConfig,
    /// What each server's protocol era is known to be.
    pub(crate) eras: Eras,
    /// Upstreams leased per request (2026-07-28 over stdio).
    pub(crate) pools: Pools,
    /// Idle timeout per server, in ms (pooled upstreams idle out by it).
    pub(crate) idle_ms: HashMap<String, u64>,
    pub(crate) epoch: Instant,
    /// The shortest idle timeout of any server (the reaper's tick follows it).
    pub(crate) shortest_idle: Duration,
    /// Prefix of minted ids (a replica id), possibly empty.
    pub(crate) prefix: String,
    pub(crate) accepting: AtomicBool,
    /// Sealed session ids: the key ring and what bounds tokens of stateless upstreams.
    pub(crate) sealing: crate::sealing::Sealing,
    /// Principals' groups, for virtual servers' access rules.
    pub(crate) directory: crate::virtuals::Directory,
}

impl<S> Shared<S> {
    pub(crate) fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }
}

/// A new session id: the prefix and 128 bits from the OS CSPRNG as 32 hex digits
/// (visible ASCII, as MCP requires).
pub(crate) fn mint_id(prefix: &str) -> String {
    let mut b = [0u8; 16];
    if getrandom::fill(&mut b).is_err() {
        // The OS CSPRNG failing is not recoverable; a predictable id would be worse.
        std::process::abort();
    }
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(prefix.len() + 32);
    s.push_str(prefix);
    for x in b {
        s.push(char::from(HEX[usize::from(x >> 4)]));
        s.push(char::from(HEX[usize::from(x & 15)]));
    }
    s
}

/// Characters of an id's random part in its short form.
const SHORT: usize = 8;

/// The short form of a session id, for log tags and the admin API: the replica prefix
/// (everything up to the last `-`; random parts are hex) and the first 8 characters of
/// the random part — `gateway-a-3f9c01ab` — so sessions of one replica stay apart in the
/// logs. Never more than half of the random part; any input is safe (ids in requests are
/// untrusted).
pub fn short_id(id: &str) -> &str {
    // A sealed id (base64url, which has '-'): its key id and the first characters of its
    // random nonce; never enough of it to be usable.
    if mcpgate_seal::looks_sealed(id) {
        return mcpgate_seal::tag(id);
    }
    let prefix = id.rfind('-').map_or(0, |i| i + 1);
    let random = id.len() - prefix;
    let n = if random >= 2 * SHORT {
        SHORT
    } else {
        random / 2
    };
    id.get(..prefix + n)
        .or_else(|| id.get(..prefix))
        .unwrap_or_default()
}

#[cfg(test)]
mod id_tests {
    use super::*;

    #[test]
    fn ids_and_their_short_form() {
        let plain = mint_id("");
        assert_eq!(plain.len(), 32);
        assert!(plain.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_eq!(short_id(&plain), &plain[..8]);
        let a = mint_id("gateway_a-");
        let b = mint_id("gateway_a-");
        assert_eq!(short_id(&a), &a[..18], "{a}");
        assert_ne!(short_id(&a), short_id(&b));
        let dashed = mint_id("eu-west-1-");
        assert_eq!(short_id(&dashed), &dashed[..18]);
        // Untrusted input: short, odd, multibyte.
        assert_eq!(short_id(""), "");
        assert_eq!(short_id("abc"), "a");
        assert_eq!(short_id("x-"), "x-");
        assert_eq!(short_id("é-ééééééééé"), "é-éééé");
    }
}

/// A reserved per-principal session slot, given back on drop.
pub(crate) struct PrincipalSlot<'a, S> {
    pub(crate) table: &'a Shared<S>,
    pub(crate) principal: Arc<str>,
    pub(crate) armed: bool,
}

impl<S> Drop for PrincipalSlot<'_, S> {
    fn drop(&mut self) {
        if self.armed {
            self.table.release_principal(&self.principal);
        }
    }
}

impl<S> Shared<S> {
    /// Gives back one session slot of `principal`.
    pub(crate) fn release_principal(&self, principal: &Arc<str>) {
        let empty = match self.per_principal.get_mut(principal) {
            Some(mut n) => {
                *n = n.saturating_sub(1);
                *n == 0
            }
            None => false,
        };
        if empty {
            self.per_principal.remove_if(principal, |_, n| *n == 0);
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn ids_are_long_random_and_visible_ascii() {
        let a = super::mint_id("r1-");
        let b = super::mint_id("r1-");
        assert_ne!(a, b);
        assert!(a.starts_with("r1-") && a.len() == 35);
        assert!(a.bytes().all(|c| (0x21..=0x7e).contains(&c)));
    }
}
