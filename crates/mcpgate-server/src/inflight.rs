//! Requests in flight per principal for the sessionless 2026-07-28 era (the session era
//! bounds them per session): a counter per principal (or client address without
//! authentication), given back when the request's answer ends.

use std::sync::Arc;

use std::sync::atomic::{AtomicUsize, Ordering};

use dashmap::DashMap;

/// Whose requests are counted together: the principal, or without authentication the
/// client's address (built without allocating).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Key {
    Principal(Arc<str>),
    Addr(std::net::IpAddr),
    Unknown,
}

/// The counters; one per front.
#[derive(Debug)]
pub(crate) struct Inflight {
    by_principal: Arc<DashMap<Key, usize>>,
    max: usize,
    /// Requests in flight that a drain waits for (not listen streams, which never end).
    draining: Arc<AtomicUsize>,
}

/// One request's place; given back on drop.
#[derive(Debug)]
pub(crate) struct Permit {
    by_principal: Arc<DashMap<Key, usize>>,
    key: Key,
    /// Set for a request a drain waits for.
    counted: Option<Arc<AtomicUsize>>,
}

impl Drop for Permit {
    fn drop(&mut self) {
        if let Some(c) = &self.counted {
            c.fetch_sub(1, Ordering::AcqRel);
        }
        let empty = match self.by_principal.get_mut(&self.key) {
            Some(mut n) => {
                *n = n.saturating_sub(1);
                *n == 0
            }
            None => false,
        };
        if empty {
            self.by_principal.remove_if(&self.key, |_, n| *n == 0);
        }
    }
}

impl Inflight {
    pub(crate) fn new(max: usize) -> Self {
        Inflight {
            by_principal: Arc::default(),
            max,
            draining: Arc::default(),
        }
    }

    /// Requests in flight that a drain waits for.
    pub(crate) fn draining(&self) -> usize {
        self.draining.load(Ordering::Acquire)
    }

    /// A slot for one more request of `key`, unless it has `max` in flight; `counted`:
    /// a drain waits for it (every request but a listen stream).
    pub(crate) fn take(&self, key: Key, counted: bool) -> Option<Permit> {
        let mut n = self.by_principal.entry(key.clone()).or_insert(0);
        if *n >= self.max {
            return None;
        }
        *n += 1;
        drop(n);
        let counted = counted.then(|| {
            self.draining.fetch_add(1, Ordering::AcqRel);
            self.draining.clone()
        });
        Some(Permit {
            by_principal: self.by_principal.clone(),
            key,
            counted,
        })
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn bounded_per_key_and_given_back() {
        use super::Key;
        let f = super::Inflight::new(2);
        let a = || Key::Principal(std::sync::Arc::from("alice"));
        let s1 = f.take(a(), true).unwrap();
        let _s2 = f.take(a(), false).unwrap();
        assert!(f.take(a(), true).is_none());
        assert_eq!(f.draining(), 1, "only the counted one");
        assert!(
            f.take(Key::Principal(std::sync::Arc::from("bob")), true)
                .is_some()
        );
        let addr = || Key::Addr(std::net::Ipv4Addr::LOCALHOST.into());
        let _x = f.take(addr(), true).unwrap();
        let _y = f.take(addr(), true).unwrap();
        assert!(
            f.take(addr(), true).is_none(),
            "an address is bounded like a principal"
        );
        drop(s1);
        assert!(f.take(a(), true).is_some());
    }
}
