//! The process-wide reaper of stdio children (`mcpgate-child`'s [`Reaper`]), started
//! once and shared by the gateway's session tables and the Inspector's.

use std::path::Path;
use std::sync::{Arc, OnceLock};

use mcpgate_child::Reaper;

/// The process-wide reaper of stdio children (started on first use, shared by every
/// session table a reload builds): this binary again, as its hidden `reaper` subcommand.
/// Without it (it could not start: logged) children still end with their sessions, but
/// not with a gateway that is killed.
pub(crate) fn child_reaper() -> Option<Arc<Reaper>> {
    static REAPER: OnceLock<Option<Arc<Reaper>>> = OnceLock::new();
    REAPER
        .get_or_init(
            || match Reaper::start(Path::new("/proc/self/exe"), &["reaper"]) {
                Ok(r) => Some(Arc::new(r)),
                Err(e) => {
                    tracing::error!("{e}: stdio children will not be killed if the gateway is");
                    None
                }
            },
        )
        .clone()
}
