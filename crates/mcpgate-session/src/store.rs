//! The session store: live entries by id, counted per principal, and the ids they get.
//! Generic over what it stores so that what it stores (a session, which removes itself
//! from here at its teardown) can name it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use dashmap::DashMap;

use crate::error::SessionError;

/// Live entries by id, and how many each principal holds.
pub(crate) struct Store<E> {
    map: DashMap<Arc<str>, Arc<E>>,
    /// Live entries per principal (only principals with at least one).
    per_principal: DashMap<Arc<str>, usize>,
    /// Prefix of minted ids (a replica id), possibly empty.
    prefix: String,
    accepting: AtomicBool,
    max: usize,
    max_per_principal: usize,
}

/// What a new entry goes in with.
pub(crate) enum Placed<E> {
    /// It is in.
    New,
    /// An entry that is not `closing` already had the id (a concurrent resume of one
    /// sealed session): that one is used, the new one never started anything.
    Existing(Arc<E>),
}

impl<E> Store<E> {
    pub(crate) fn new(prefix: &str, max: usize, max_per_principal: usize) -> Self {
        Store {
            map: DashMap::new(),
            per_principal: DashMap::new(),
            prefix: prefix.to_owned(),
            accepting: AtomicBool::new(true),
            max,
            max_per_principal,
        }
    }

    /// The prefix of every id this store mints (the replica's).
    pub(crate) fn prefix(&self) -> &str {
        &self.prefix
    }

    /// A new id: the prefix and 128 bits from the OS CSPRNG.
    pub(crate) fn mint(&self) -> Arc<str> {
        Arc::from(mint_id(&self.prefix))
    }

    /// The entry with that id. The map guard is dropped before this returns.
    pub(crate) fn get(&self, id: &str) -> Option<Arc<E>> {
        self.map.get(id).map(|e| e.value().clone())
    }

    pub(crate) fn contains(&self, id: &str) -> bool {
        self.map.contains_key(id)
    }

    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    /// Every live entry (a snapshot).
    pub(crate) fn all(&self) -> Vec<Arc<E>> {
        self.map.iter().map(|e| e.value().clone()).collect()
    }

    /// Every live entry `keep` says yes to (a snapshot).
    pub(crate) fn filtered(&self, keep: impl Fn(&E) -> bool) -> Vec<Arc<E>> {
        self.map
            .iter()
            .filter(|e| keep(e.value()))
            .map(|e| e.value().clone())
            .collect()
    }

    /// The entry `key` ranks highest among those `keep` says yes to.
    pub(crate) fn max_by<K: Ord>(
        &self,
        keep: impl Fn(&E) -> bool,
        key: impl Fn(&E) -> K,
    ) -> Option<Arc<E>> {
        self.map
            .iter()
            .filter(|e| keep(e.value()))
            .max_by_key(|e| key(e.value()))
            .map(|e| e.value().clone())
    }

    /// Sums `f` over every live entry.
    pub(crate) fn sum(&self, f: impl Fn(&E) -> usize) -> usize {
        self.map.iter().map(|e| f(e.value())).sum()
    }

    pub(crate) fn stop_accepting(&self) {
        self.accepting.store(false, Ordering::Release);
    }

    pub(crate) fn is_accepting(&self) -> bool {
        self.accepting.load(Ordering::Acquire)
    }

    /// Room for one more entry of `principal`: a slot reserved for it, given back when the
    /// slot drops unless [`Reservation::keep`] hands it to the entry.
    pub(crate) fn reserve(
        &self,
        principal: Option<&Arc<str>>,
    ) -> Result<Reservation<'_, E>, SessionError> {
        if !self.is_accepting() {
            return Err(SessionError::ShuttingDown);
        }
        if self.map.len() >= self.max {
            return Err(SessionError::TooManySessions);
        }
        let Some(p) = principal else {
            return Ok(Reservation {
                store: self,
                principal: None,
            });
        };
        let mut n = self.per_principal.entry(p.clone()).or_insert(0);
        if *n >= self.max_per_principal {
            return Err(SessionError::TooManySessionsForPrincipal);
        }
        *n += 1;
        Ok(Reservation {
            store: self,
            principal: Some(p.clone()),
        })
    }

    /// Puts `entry` in under `id`; `closing` says which entry gives way to a new one.
    pub(crate) fn place(
        &self,
        id: Arc<str>,
        entry: &Arc<E>,
        closing: impl Fn(&E) -> bool,
    ) -> Placed<E> {
        match self.map.entry(id) {
            dashmap::Entry::Occupied(e) if !closing(e.get()) => Placed::Existing(e.get().clone()),
            // A closing copy (its teardown removes only itself) gives way.
            dashmap::Entry::Occupied(mut e) => {
                e.insert(entry.clone());
                Placed::New
            }
            dashmap::Entry::Vacant(v) => {
                v.insert(entry.clone());
                Placed::New
            }
        }
    }

    /// Takes `entry` out, if `id` still names that entry (not one that replaced it).
    pub(crate) fn remove(&self, id: &str, entry: &Arc<E>) {
        self.map.remove_if(id, |_, e| Arc::ptr_eq(e, entry));
    }

    /// Gives back one slot of `principal`.
    pub(crate) fn release(&self, principal: &Arc<str>) {
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

/// A reserved slot of the store, given back on drop unless kept.
pub(crate) struct Reservation<'a, E> {
    store: &'a Store<E>,
    principal: Option<Arc<str>>,
}

impl<E> Reservation<'_, E> {
    /// The entry now holds the slot: given back at its teardown.
    pub(crate) fn keep(mut self) {
        self.principal = None;
    }
}

impl<E> Drop for Reservation<'_, E> {
    fn drop(&mut self) {
        if let Some(p) = &self.principal {
            self.store.release(p);
        }
    }
}

/// A new id: the prefix and 128 bits from the OS CSPRNG as 32 hex digits (visible ASCII,
/// as MCP requires).
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
mod tests {
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

    #[test]
    fn ids_are_long_random_and_visible_ascii() {
        let a = mint_id("r1-");
        let b = mint_id("r1-");
        assert_ne!(a, b);
        assert!(a.starts_with("r1-") && a.len() == 35);
        assert!(a.bytes().all(|c| (0x21..=0x7e).contains(&c)));
    }

    #[test]
    fn slots_are_counted_per_principal_and_given_back() {
        let s: Store<u8> = Store::new("", 10, 1);
        let p: Arc<str> = Arc::from("alice");
        let slot = s.reserve(Some(&p)).unwrap();
        assert!(matches!(
            s.reserve(Some(&p)),
            Err(SessionError::TooManySessionsForPrincipal)
        ));
        drop(slot);
        let kept = s.reserve(Some(&p)).unwrap();
        kept.keep();
        assert!(s.reserve(Some(&p)).is_err());
        s.release(&p);
        assert!(s.reserve(Some(&p)).is_ok());
    }
}
