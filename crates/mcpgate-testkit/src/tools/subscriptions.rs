//! Resource subscriptions, shared by all the sessions of one server.

use std::collections::HashMap;
use std::sync::Mutex;

use super::{Standalone, lock};

/// The server's resource subscriptions: by URI, the standalone channel of
/// each subscribed session (by session id).
#[derive(Default)]
pub(crate) struct Subscriptions {
    by_uri: Mutex<HashMap<String, HashMap<String, Standalone>>>,
}

impl std::fmt::Debug for Subscriptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let uris: Vec<String> = lock(&self.by_uri).keys().cloned().collect();
        f.debug_struct("Subscriptions")
            .field("uris", &uris)
            .finish()
    }
}

impl Subscriptions {
    /// Subscribes `session` to `uri`; updates go to `channel`.
    pub(super) fn subscribe(&self, uri: &str, session: &str, channel: Standalone) {
        lock(&self.by_uri)
            .entry(uri.to_owned())
            .or_default()
            .insert(session.to_owned(), channel);
    }

    /// Ends `session`'s subscription to `uri`.
    pub(super) fn unsubscribe(&self, uri: &str, session: &str) {
        let mut map = lock(&self.by_uri);
        if let Some(sessions) = map.get_mut(uri) {
            sessions.remove(session);
            if sessions.is_empty() {
                map.remove(uri);
            }
        }
    }

    /// Drops every subscription of a session.
    pub(super) fn forget(&self, session: &str) {
        lock(&self.by_uri).retain(|_, sessions| {
            sessions.remove(session);
            !sessions.is_empty()
        });
    }

    /// The standalone channels of the sessions subscribed to `uri`.
    pub(super) fn subscribers(&self, uri: &str) -> Vec<Standalone> {
        lock(&self.by_uri)
            .get(uri)
            .map(|sessions| sessions.values().cloned().collect())
            .unwrap_or_default()
    }
}
