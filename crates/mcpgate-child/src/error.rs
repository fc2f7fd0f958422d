//! [`ChildError`]: why a child cannot be contained or started.

use std::path::PathBuf;
use std::process::ExitStatus;
use std::sync::Arc;

/// Why a stdio child cannot be contained as configured, or cannot start.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ChildError {
    /// A limit of zero (nothing could run under it).
    #[error("{at}: limits.{name} must be above zero (cpu in whole seconds)")]
    ZeroLimit {
        /// The server.
        at: String,
        /// The limit's key.
        name: &'static str,
    },
    /// Too few open files for any program.
    #[error(
        "{at}: limits.open_files = {n} leaves no room for the program's own files; use 16 or more"
    )]
    FewFiles {
        /// The server.
        at: String,
        /// The configured limit.
        n: u64,
    },
    /// A sandbox path that cannot be bound.
    #[error("{at}: sandbox path {} {why}", path.display())]
    BindPath {
        /// The server.
        at: String,
        /// The configured path.
        path: PathBuf,
        /// "does not exist", "is not absolute".
        why: &'static str,
    },
    /// The sandbox program cannot be run.
    #[error("{at}: cannot run {} ({source}); install bubblewrap (Debian: apt-get install bubblewrap) or set sandbox.bwrap", program.display())]
    NoSandbox {
        /// The server.
        at: String,
        /// The sandbox program.
        program: PathBuf,
        /// Why it could not run.
        source: Arc<std::io::Error>,
    },
    /// The sandbox program runs but cannot build the sandbox here (no user namespaces, a
    /// seccomp filter, …).
    #[error("{at}: {} cannot build the sandbox on this host ({status}): {said}", program.display())]
    SandboxRefused {
        /// The server.
        at: String,
        /// The sandbox program.
        program: PathBuf,
        /// How it exited.
        status: ExitStatus,
        /// What it said on stderr.
        said: String,
    },
    /// A session's private `/tmp` cannot be made.
    #[error("cannot create the private /tmp {}: {source}", path.display())]
    PrivateTmp {
        /// The directory.
        path: PathBuf,
        /// Why.
        source: Arc<std::io::Error>,
    },
    /// A cgroup the gateway cannot use.
    #[error("cgroup {}: {why}: {source}", path.display())]
    Cgroup {
        /// The cgroup's directory.
        path: PathBuf,
        /// What is wrong with it.
        why: &'static str,
        /// The file system's answer.
        source: Arc<std::io::Error>,
    },
    /// `stdio_cgroup = "delegated"` where the gateway's own cgroup cannot be the subtree.
    #[error("upstream.stdio_cgroup = \"delegated\": {why}")]
    CgroupDelegated {
        /// Why no delegated subtree is found.
        why: &'static str,
    },
    /// The reaper process cannot be started.
    #[error("cannot start the reaper process ({}): {source}", program.display())]
    Reaper {
        /// The program started as the reaper.
        program: PathBuf,
        /// Why.
        source: Arc<std::io::Error>,
    },
}
