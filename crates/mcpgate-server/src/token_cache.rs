//! Verified JWTs, remembered for their validity so a client's every request does not pay
//! a signature check: a bearer token that verified maps to its principal until the token
//! expires, and at most [`TTL`] (so a key the issuer withdraws stops working soon).
//! Bounded: past [`CAPACITY`] entries the expired ones go, and if that is not enough,
//! all of them (the next requests verify again). Only successes are remembered.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use dashmap::DashMap;

/// Longest a verification is trusted.
pub(crate) const TTL: Duration = Duration::from_secs(60);
/// Most tokens remembered.
pub(crate) const CAPACITY: usize = 10_000;

#[derive(Debug, Default)]
pub(crate) struct TokenCache {
    map: DashMap<Box<str>, (Arc<str>, Instant)>,
}

impl TokenCache {
    /// The principal of `token`, if it verified recently and has not expired.
    pub(crate) fn get(&self, token: &str) -> Option<Arc<str>> {
        let hit = self.map.get(token)?;
        let (who, until) = hit.value();
        if Instant::now() < *until {
            return Some(who.clone());
        }
        drop(hit);
        self.map.remove(token);
        None
    }

    /// Remembers that `token` verified as `who` and expires at `exp` (seconds since the
    /// epoch, the JWT claim).
    pub(crate) fn put(&self, token: &str, who: Arc<str>, exp: Option<u64>) {
        let now = Instant::now();
        let left = exp
            .and_then(|exp| {
                let at = UNIX_EPOCH + Duration::from_secs(exp);
                at.duration_since(SystemTime::now()).ok()
            })
            .unwrap_or(Duration::ZERO)
            .min(TTL);
        if left.is_zero() {
            return;
        }
        if self.map.len() >= CAPACITY {
            self.map.retain(|_, (_, until)| *until > now);
            if self.map.len() >= CAPACITY {
                self.map.clear();
            }
        }
        self.map.insert(token.into(), (who, now + left));
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.map.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn in_secs(s: u64) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs()
            + s
    }

    #[test]
    fn remembers_until_expiry() {
        let c = TokenCache::default();
        c.put("a", Arc::from("jwt:a"), Some(in_secs(300)));
        assert_eq!(c.get("a").as_deref(), Some("jwt:a"));
        assert_eq!(c.get("b"), None);
        // Expired, or without an expiry: never remembered.
        c.put(
            "old",
            Arc::from("jwt:old"),
            Some(in_secs(0).saturating_sub(10)),
        );
        c.put("none", Arc::from("jwt:none"), None);
        assert_eq!(c.get("old"), None);
        assert_eq!(c.get("none"), None);
    }

    #[test]
    fn bounded() {
        let c = TokenCache::default();
        for i in 0..CAPACITY + 10 {
            c.put(&format!("t{i}"), Arc::from("jwt:x"), Some(in_secs(300)));
        }
        assert!(c.len() <= CAPACITY, "{}", c.len());
        assert!(c.get(&format!("t{}", CAPACITY + 9)).is_some());
    }
}
