//! What a child runs under: its sandbox and its limits, as configured.

use std::path::PathBuf;
use std::time::Duration;

/// How one stdio server's children are contained. The default is none of it: the child
/// runs as the gateway does (its user, filesystem view and network), with no limits.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Containment {
    /// Run each child in a bubblewrap sandbox.
    pub sandbox: Option<Sandbox>,
    /// Bounds on each child (and its descendants).
    pub limits: Limits,
}

/// A bubblewrap sandbox: a read-only view of the system's programs and libraries, only the
/// configured paths, a private `/tmp` per session, no network unless allowed, no new
/// privileges, every capability dropped, its own PID namespace (its descendants die with it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sandbox {
    /// Paths visible inside, at the same place.
    pub binds: Vec<Bind>,
    /// Whether the child may use the host's network.
    pub network: Network,
    /// The bubblewrap program (default `bwrap` on `PATH`).
    pub bwrap: PathBuf,
}

/// A path shown inside the sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bind {
    /// The host path (absolute), shown at the same path inside.
    pub path: PathBuf,
    /// Writable (otherwise read-only).
    pub writable: bool,
}

/// A sandboxed child's network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Network {
    /// Its own network namespace: a loopback of its own, nothing of the host's (not even
    /// the host's 127.0.0.1).
    #[default]
    Off,
    /// The host's network.
    Host,
}

/// Bounds on one child and everything it starts. Memory and processes are watched by the
/// gateway (the child's process group, sampled from `/proc`); CPU time and open files are
/// kernel rlimits set before the program starts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Limits {
    /// Resident memory of the whole process group, in bytes.
    pub memory: Option<u64>,
    /// CPU time of each process (RLIMIT_CPU).
    pub cpu: Option<Duration>,
    /// Processes and threads in the process group.
    pub processes: Option<u64>,
    /// Open files per process (RLIMIT_NOFILE).
    pub open_files: Option<u64>,
}

impl Limits {
    /// Whether the gateway has to sample the child's group (memory or process bounds).
    pub fn watched(&self) -> bool {
        self.memory.is_some() || self.processes.is_some()
    }
}

/// The system directories shown read-only inside every sandbox (those that exist).
pub(crate) const SYSTEM_PATHS: &[&str] = &["/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32"];

/// The files and directories of `/etc` shown read-only inside (those that exist): name
/// resolution, TLS roots (the certificates, not `/etc/ssl/private`), the dynamic linker,
/// time zone, user names. Not `shadow`, not `ssh`, not anything else.
pub(crate) const ETC_PATHS: &[&str] = &[
    "/etc/alternatives",
    "/etc/ca-certificates",
    "/etc/group",
    "/etc/host.conf",
    "/etc/hosts",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/nsswitch.conf",
    "/etc/passwd",
    "/etc/pki/tls/certs",
    "/etc/resolv.conf",
    "/etc/ssl/certs",
];
