//! What the v2 backend keeps: the UI's files, its connections, its stores, the relay.

use std::path::Path;

use crate::error::InspectorError;
use crate::ssrf::FetchAllow;
use crate::v2::{side, ui};

/// The v2 backend's own state.
pub(crate) struct V2 {
    pub(crate) ui: ui::Ui,
    pub(crate) stores: side::Stores,
    pub(crate) fetcher: side::Fetcher,
}

impl V2 {
    /// Loads the UI from `dir` (with `token` injected into its `index.html`).
    pub(crate) fn new(
        dir: &Path,
        token: Option<&str>,
        allow: FetchAllow,
    ) -> Result<V2, InspectorError> {
        Ok(V2 {
            ui: ui::Ui::load(dir, token)?,
            stores: side::Stores::default(),
            fetcher: side::Fetcher::new(allow)?,
        })
    }
}
