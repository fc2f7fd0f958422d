//! The latest verified client token of each principal, for token exchange (RFC 8693):
//! the front's authenticator tells it every JWT that verifies; an exchange uses the
//! principal's newest one that has not expired. Bounded: beyond the bound the oldest
//! entry is forgotten (its principal's next request tells it again).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::settings::Secret;

/// Most principals remembered.
const MAX_PRINCIPALS: usize = 10_000;

/// A principal's verified token and its expiry (seconds since the epoch).
#[derive(Debug, Clone)]
struct Subject {
    token: Secret,
    exp: Option<u64>,
    seen: u64,
}

/// Each principal's latest verified token. Plain lock, held for a map operation only.
#[derive(Debug, Default)]
pub struct Subjects {
    by_principal: Mutex<HashMap<Arc<str>, Subject>>,
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_secs()
}

impl Subjects {
    /// Remembers `token` as `principal`'s latest (it verified; `exp` is its expiry).
    pub fn verified(&self, principal: &str, token: &str, exp: Option<u64>) {
        let Ok(mut map) = self.by_principal.lock() else {
            return;
        };
        if map.len() >= MAX_PRINCIPALS
            && !map.contains_key(principal)
            && let Some(oldest) = map
                .iter()
                .min_by_key(|(_, s)| s.seen)
                .map(|(k, _)| k.clone())
        {
            map.remove(&oldest);
        }
        map.insert(
            Arc::from(principal),
            Subject {
                token: Secret::new(token),
                exp,
                seen: now(),
            },
        );
    }

    /// `principal`'s latest token, unless it expired.
    pub(crate) fn get(&self, principal: &str) -> Option<Secret> {
        let map = self.by_principal.lock().ok()?;
        let s = map.get(principal)?;
        s.exp.is_none_or(|e| e > now()).then(|| s.token.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_latest_unexpired_token_is_used() {
        let s = Subjects::default();
        assert!(s.get("jwt:a").is_none());
        s.verified("jwt:a", "one", Some(now() + 60));
        s.verified("jwt:a", "two", Some(now() + 60));
        assert_eq!(s.get("jwt:a").unwrap().expose(), "two");
        s.verified("jwt:b", "old", Some(now() - 1));
        assert!(s.get("jwt:b").is_none());
    }
}
