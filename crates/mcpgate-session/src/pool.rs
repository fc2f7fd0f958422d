//! One keyed pool for what the gateway holds on behalf of requests that have no session
//! of their own: a principal's stdio child for 2026-07-28 requests (one per key, shared by
//! that principal's concurrent requests), and the era bridge's upstream sessions (up to N
//! per key, each leased to one request at a time, the last one given back first).
//!
//! Items are started by the request that finds none (the others of its key wait, bounded,
//! until one is started or given back), counted while leased, and dropped when they die;
//! what idles out is taken out by the table's reaper.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::error::SessionError;

/// What a pool holds.
pub(crate) trait Poolable: Send + Sync {
    /// Whether it can serve no more requests (it ended).
    fn is_dead(&self) -> bool;
}

/// How many items a key may have, and how many requests each serves at once.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Shape {
    /// Items per key.
    pub(crate) per_key: usize,
    /// Whether an item serves one request at a time (else any number).
    pub(crate) exclusive: bool,
}

struct Item<V> {
    value: Arc<V>,
    leased: usize,
    /// When it was last given back (the pool's clock, ms).
    last_used: u64,
}

struct Items<V> {
    items: Vec<Item<V>>,
    /// Items being started for the key.
    starting: usize,
}

impl<V> Default for Items<V> {
    fn default() -> Self {
        Items {
            items: Vec::new(),
            starting: 0,
        }
    }
}

/// A keyed pool (see the module docs).
pub(crate) struct Pool<K, V> {
    /// Plain mutex: map updates only, never held across an `.await`.
    slots: Mutex<HashMap<K, Items<V>>>,
    freed: Notify,
    shape: Shape,
    /// How long a request waits for an item of its key.
    wait: Duration,
    epoch: Instant,
}

/// What taking an item found.
enum Take<V> {
    /// An item, now leased.
    Found(Arc<V>),
    /// None: the caller starts one.
    Start,
    /// None free, and the key has all the items it may: wait for one to come back.
    Wait,
}

impl<K: Clone + Eq + Hash, V: Poolable> Pool<K, V> {
    pub(crate) fn new(shape: Shape, wait: Duration) -> Self {
        Pool {
            slots: Mutex::default(),
            freed: Notify::new(),
            shape,
            wait,
            epoch: Instant::now(),
        }
    }

    fn now(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn take(&self, key: &K) -> Take<V> {
        let Ok(mut slots) = self.slots.lock() else {
            return Take::Wait;
        };
        let slot = slots.entry(key.clone()).or_default();
        slot.items.retain(|i| !i.value.is_dead());
        let exclusive = self.shape.exclusive;
        let free = slot
            .items
            .iter_mut()
            .filter(|i| !exclusive || i.leased == 0)
            .max_by_key(|i| i.last_used);
        if let Some(item) = free {
            item.leased += 1;
            return Take::Found(item.value.clone());
        }
        if slot.items.len() + slot.starting >= self.shape.per_key {
            return Take::Wait;
        }
        slot.starting += 1;
        Take::Start
    }

    /// A start that `take` allowed has ended (`Some`: the new item, leased to its starter).
    fn started(&self, key: &K, value: Option<Arc<V>>) {
        let now = self.now();
        if let Ok(mut slots) = self.slots.lock()
            && let Some(slot) = slots.get_mut(key)
        {
            slot.starting = slot.starting.saturating_sub(1);
            if let Some(value) = value {
                slot.items.push(Item {
                    value,
                    leased: 1,
                    last_used: now,
                });
            }
            if slot.items.is_empty() && slot.starting == 0 {
                slots.remove(key);
            }
        }
        self.freed.notify_waiters();
    }

    /// An item of `key` is given back (dropped from the pool when it died meanwhile).
    fn give_back(&self, key: &K, value: &Arc<V>) {
        let now = self.now();
        if let Ok(mut slots) = self.slots.lock()
            && let Some(slot) = slots.get_mut(key)
        {
            if let Some(i) = slot.items.iter_mut().find(|i| Arc::ptr_eq(&i.value, value)) {
                i.leased = i.leased.saturating_sub(1);
                i.last_used = now;
            }
            slot.items.retain(|i| !i.value.is_dead());
            if slot.items.is_empty() && slot.starting == 0 {
                slots.remove(key);
            }
        }
        self.freed.notify_waiters();
    }

    /// An item of `key` leased to the caller: a free one, or one `start` makes (the other
    /// requests of the key wait for it, up to the pool's wait; then
    /// [`SessionError::TooManyInflight`]).
    pub(crate) async fn lease<F, Fut>(
        self: &Arc<Self>,
        key: &K,
        start: F,
    ) -> Result<Leased<K, V>, SessionError>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Result<V, SessionError>>,
    {
        let deadline = tokio::time::Instant::now() + self.wait;
        loop {
            let freed = self.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            match self.take(key) {
                Take::Found(value) => return Ok(self.leased(key, value)),
                Take::Start => {
                    // Given back however the start ends (its caller may be dropped).
                    let mut ticket = Starting(Some((self.clone(), key.clone())));
                    let value = Arc::new(start().await?);
                    ticket.0 = None;
                    self.started(key, Some(value.clone()));
                    return Ok(self.leased(key, value));
                }
                Take::Wait => {
                    if tokio::time::timeout_at(deadline, freed).await.is_err() {
                        return Err(SessionError::TooManyInflight);
                    }
                }
            }
        }
    }

    fn leased(self: &Arc<Self>, key: &K, value: Arc<V>) -> Leased<K, V> {
        Leased {
            pool: self.clone(),
            key: key.clone(),
            value,
        }
    }

    /// Takes out the items nobody leases that were unused for `idle_ms(key)` (the reaper
    /// ends them), and the dead ones.
    pub(crate) fn expired(&self, idle_ms: impl Fn(&K) -> u64) -> Vec<Arc<V>> {
        let now = self.now();
        let Ok(mut slots) = self.slots.lock() else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for (key, slot) in slots.iter_mut() {
            let limit = idle_ms(key);
            slot.items.retain(|i| {
                let stale = i.leased == 0 && now.saturating_sub(i.last_used) >= limit;
                if stale || i.value.is_dead() {
                    out.push(i.value.clone());
                    false
                } else {
                    true
                }
            });
        }
        slots.retain(|_, s| !s.items.is_empty() || s.starting > 0);
        out
    }

    /// Takes out every item of the keys `which` says yes to (their server was removed or
    /// changed; shutdown takes them all).
    pub(crate) fn drain(&self, which: impl Fn(&K) -> bool) -> Vec<Arc<V>> {
        let Ok(mut slots) = self.slots.lock() else {
            return Vec::new();
        };
        let keys: Vec<K> = slots.keys().filter(|k| which(k)).cloned().collect();
        keys.into_iter()
            .filter_map(|k| slots.remove(&k))
            .flat_map(|s| s.items.into_iter().map(|i| i.value))
            .collect()
    }

    /// Items per key: (held, leased), for the admin API and tests.
    pub(crate) fn counts(&self) -> Vec<(K, usize, usize)> {
        self.slots
            .lock()
            .map(|m| {
                m.iter()
                    .map(|(k, s)| {
                        let busy = s.items.iter().filter(|i| i.leased > 0).count();
                        (k.clone(), s.items.len() + s.starting, busy)
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// A start under way; given up on (its key's slot freed) if dropped before it ends.
struct Starting<K: Clone + Eq + Hash, V: Poolable>(Option<(Arc<Pool<K, V>>, K)>);

impl<K: Clone + Eq + Hash, V: Poolable> Drop for Starting<K, V> {
    fn drop(&mut self) {
        if let Some((pool, key)) = self.0.take() {
            pool.started(&key, None);
        }
    }
}

/// An item leased to one request; given back when dropped.
pub(crate) struct Leased<K: Clone + Eq + Hash, V: Poolable> {
    pool: Arc<Pool<K, V>>,
    key: K,
    value: Arc<V>,
}

impl<K: Clone + Eq + Hash, V: Poolable> Leased<K, V> {
    pub(crate) fn get(&self) -> &Arc<V> {
        &self.value
    }
}

impl<K: Clone + Eq + Hash, V: Poolable> Drop for Leased<K, V> {
    fn drop(&mut self) {
        self.pool.give_back(&self.key, &self.value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    struct Thing(u32, AtomicBool);

    impl Poolable for Thing {
        fn is_dead(&self) -> bool {
            self.1.load(Ordering::Relaxed)
        }
    }

    fn thing(n: u32) -> Thing {
        Thing(n, AtomicBool::new(false))
    }

    #[tokio::test]
    async fn exclusive_items_go_to_one_request_and_come_back_last_first() {
        let shape = Shape {
            per_key: 2,
            exclusive: true,
        };
        let pool = Arc::new(Pool::new(shape, Duration::from_millis(50)));
        let a = pool.lease(&"k", || async { Ok(thing(1)) }).await.unwrap();
        let b = pool.lease(&"k", || async { Ok(thing(2)) }).await.unwrap();
        // Both leased, the key full: a third waits and gives up.
        let full = pool.lease(&"k", || async { Ok(thing(3)) }).await;
        assert!(matches!(full, Err(SessionError::TooManyInflight)));
        drop(a);
        tokio::time::sleep(Duration::from_millis(2)).await;
        drop(b);
        let again = pool.lease(&"k", || async { Ok(thing(9)) }).await.unwrap();
        assert_eq!(again.get().0, 2, "the one given back last");
        again.get().1.store(true, Ordering::Relaxed);
        drop(again);
        assert_eq!(pool.counts(), vec![("k", 1, 0)], "the dead one is gone");
    }

    #[tokio::test]
    async fn a_shared_item_serves_every_request_of_its_key() {
        let shape = Shape {
            per_key: 1,
            exclusive: false,
        };
        let pool = Arc::new(Pool::new(shape, Duration::from_millis(50)));
        let a = pool.lease(&"k", || async { Ok(thing(1)) }).await.unwrap();
        let b = pool.lease(&"k", || async { Ok(thing(2)) }).await.unwrap();
        assert_eq!(b.get().0, 1);
        assert_eq!(pool.counts(), vec![("k", 1, 1)]);
        drop((a, b));
        assert_eq!(
            pool.expired(|_| 0).len(),
            1,
            "unused: taken out by the reaper"
        );
        // A start that fails gives its slot back.
        let failed = pool
            .lease(&"k", || async { Err(SessionError::Closed) })
            .await;
        assert!(failed.is_err());
        assert!(pool.counts().is_empty());
    }
}
