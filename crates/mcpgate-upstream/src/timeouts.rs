//! Upper bounds on each upstream step.

use std::time::Duration;

/// Upper bounds on each upstream step.
#[derive(Debug, Clone)]
pub struct Timeouts {
    /// TCP connect.
    pub connect: Duration,
    /// Time until the upstream answers a request (headers for HTTP; the response for stdio
    /// is bounded by the session layer).
    pub request: Duration,
    /// The HTTP DELETE at teardown.
    pub delete: Duration,
    /// stdio: how long after closing stdin the child may take to exit before SIGTERM, and
    /// after SIGTERM before SIGKILL.
    pub exit_grace: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            connect: Duration::from_secs(5),
            request: Duration::from_secs(300),
            delete: Duration::from_secs(5),
            exit_grace: Duration::from_secs(2),
        }
    }
}
