//! A token kept for everyone who uses it, renewed under one flight: the request path
//! reads it without a lock; when it is missing or about to expire (or the server refused
//! it), the first caller fetches a new one while the others wait for that one, so N
//! sessions never cause N token requests.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::ArcSwapOption;
use http::HeaderValue;
use mcpgate_upstream::{Credential, CredentialError, CredentialFuture};
use tracing::debug;

use crate::client::Token;

/// A future of a new token.
pub(crate) type TokenFuture<'a> =
    Pin<Box<dyn Future<Output = Result<Token, CredentialError>> + Send + 'a>>;

/// How a credential gets a new token, given the one it had (whose refresh token it may
/// use).
pub(crate) trait Fetch: Send + Sync + fmt::Debug + 'static {
    /// A new token.
    fn fetch<'a>(&'a self, previous: Option<&'a Token>) -> TokenFuture<'a>;
}

/// A token shared by the sessions that use it, and how to get the next.
pub(crate) struct Cached<F> {
    pub(crate) fetch: F,
    current: ArcSwapOption<Token>,
    flight: tokio::sync::Mutex<()>,
    margin: Duration,
    /// For logs: whose it is, for which server.
    label: Arc<str>,
}

impl<F: Fetch> Cached<F> {
    /// Tokens from `fetch`, renewed `margin` before they expire.
    pub(crate) fn new(fetch: F, margin: Duration, label: impl Into<Arc<str>>) -> Self {
        Cached {
            fetch,
            current: ArcSwapOption::empty(),
            flight: tokio::sync::Mutex::new(()),
            margin,
            label: label.into(),
        }
    }

    /// Forgets the token (a grant revoked or replaced).
    pub(crate) fn forget(&self) {
        self.current.store(None);
    }

    /// Fetches under the flight unless `still_good` accepts the token someone else got
    /// while this caller waited.
    async fn renew(
        &self,
        still_good: impl Fn(&Token) -> bool,
    ) -> Result<HeaderValue, CredentialError> {
        let _one = self.flight.lock().await;
        let previous = self.current.load_full();
        if let Some(t) = previous.as_deref().filter(|t| still_good(t)) {
            return Ok(t.header.clone());
        }
        let token = self.fetch.fetch(previous.as_deref()).await?;
        debug!(credential = %self.label, expires_in = ?token.expires.map(|(_, life)| life), "upstream token obtained");
        let header = token.header.clone();
        self.current.store(Some(Arc::new(token)));
        Ok(header)
    }
}

impl<F> fmt::Debug for Cached<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cached")
            .field("label", &self.label)
            .finish_non_exhaustive()
    }
}

impl<F: Fetch> Credential for Cached<F> {
    fn cached(&self) -> Option<HeaderValue> {
        let guard = self.current.load();
        guard
            .as_deref()
            .filter(|t| t.fresh(self.margin))
            .map(|t| t.header.clone())
    }

    fn current(&self) -> CredentialFuture<'_> {
        Box::pin(self.renew(|t| t.fresh(self.margin)))
    }

    fn refused<'a>(&'a self, used: &'a HeaderValue) -> CredentialFuture<'a> {
        // Someone else already replaced the refused token: use theirs.
        Box::pin(self.renew(move |t| t.header != used && t.fresh(self.margin)))
    }
}

/// Most principals whose tokens one server keeps in memory (beyond: one is forgotten;
/// its sessions keep theirs).
const MAX_PRINCIPALS: usize = 10_000;

/// Per-principal credentials of one server, bounded in number.
#[derive(Debug)]
pub(crate) struct Principals<F> {
    by: Mutex<HashMap<Arc<str>, Arc<Cached<F>>>>,
    /// How long before expiry a token is renewed.
    margin: std::time::Duration,
}

impl<F: Fetch> Principals<F> {
    pub(crate) fn new(margin: std::time::Duration) -> Self {
        Principals {
            by: Mutex::new(HashMap::new()),
            margin,
        }
    }

    /// `principal`'s credential, made by `make` the first time.
    pub(crate) fn get(&self, principal: &str, make: impl FnOnce(Arc<str>) -> F) -> Arc<Cached<F>> {
        let Ok(mut by) = self.by.lock() else {
            // A poisoned map: a credential of its own for this session.
            return Arc::new(Cached::new(
                make(Arc::from(principal)),
                self.margin,
                principal,
            ));
        };
        if let Some(c) = by.get(principal) {
            return c.clone();
        }
        if by.len() >= MAX_PRINCIPALS
            && let Some(k) = by.keys().next().cloned()
        {
            by.remove(&k);
        }
        let key: Arc<str> = Arc::from(principal);
        let c = Arc::new(Cached::new(make(key.clone()), self.margin, key.clone()));
        by.insert(key, c.clone());
        c
    }
}

impl<F> Principals<F> {
    /// `principal`'s credential, if one was made.
    pub(crate) fn peek(&self, principal: &str) -> Option<Arc<Cached<F>>> {
        self.by.lock().ok()?.get(principal).cloned()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[derive(Debug, Default)]
    struct Counting(AtomicUsize);

    impl Fetch for Counting {
        fn fetch<'a>(&'a self, _: Option<&'a Token>) -> TokenFuture<'a> {
            Box::pin(async move {
                let n = self.0.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(20)).await;
                let mut header = HeaderValue::try_from(format!("Bearer t{n}")).unwrap();
                header.set_sensitive(true);
                Ok(Token {
                    header,
                    expires: Some((
                        std::time::Instant::now() + Duration::from_secs(60),
                        Duration::from_secs(60),
                    )),
                    refresh: None,
                    scope: None,
                })
            })
        }
    }

    #[tokio::test]
    async fn many_callers_one_token_request() {
        let c = Arc::new(Cached::new(
            Counting::default(),
            Duration::from_secs(5),
            "t",
        ));
        assert!(c.cached().is_none());
        let mut all = Vec::new();
        for _ in 0..50 {
            let c = c.clone();
            all.push(tokio::spawn(async move { c.current().await.unwrap() }));
        }
        for h in all {
            assert_eq!(h.await.unwrap(), "Bearer t0");
        }
        assert_eq!(c.fetch.0.load(Ordering::SeqCst), 1);
        assert_eq!(c.cached().unwrap(), "Bearer t0");
    }

    #[tokio::test]
    async fn a_refused_token_is_replaced_once() {
        let c = Arc::new(Cached::new(
            Counting::default(),
            Duration::from_secs(5),
            "t",
        ));
        let first = c.current().await.unwrap();
        let mut all = Vec::new();
        for _ in 0..20 {
            let (c, used) = (c.clone(), first.clone());
            all.push(tokio::spawn(async move { c.refused(&used).await.unwrap() }));
        }
        for h in all {
            assert_eq!(h.await.unwrap(), "Bearer t1");
        }
        assert_eq!(c.fetch.0.load(Ordering::SeqCst), 2);
    }
}
