//! # mcpgate-child
//!
//! How mcpgate starts and contains the process of a stdio MCP server: one concept, the
//! child process, from its command line to its last descendant. The transport that talks
//! to the child over its pipes is `mcpgate-upstream`'s; this crate decides what runs and
//! under which bounds, and makes sure nothing of it outlives its session or the gateway.
//!
//! - `contain.rs`: [`Containment`] — a [`Sandbox`] (bubblewrap: read-only system, only
//!   the configured [`Bind`]s, private `/tmp`, [`Network`] off by default, no
//!   capabilities, its own PID namespace) and [`Limits`].
//! - `check.rs`: [`Containment::check`], whether this host can provide them (for
//!   `--check-config` and start-up).
//! - `command.rs`: [`Launch`], the command line (the program, or bubblewrap around it),
//!   its environment (scrubbed when sandboxed), and rlimits (CPU time, open files) set
//!   between fork and exec.
//! - `tmp.rs`: [`PrivateTmp`], a sandboxed session's `/tmp` on the host.
//! - `watch.rs`: [`Watch`], the sampler that holds process groups to their memory and
//!   process bounds and says why it killed one ([`Breach`]).
//! - `cgroup.rs`: [`Cgroups`], a delegated cgroup v2 subtree, and [`Cgroup`], one child's
//!   cgroup there (killed whole, removed at reaping; memory and process bounds held by
//!   the kernel where the subtree has the controllers).
//! - `reaper.rs`: [`Reaper`] and [`reaper::serve`], the helper process that kills every
//!   child's group when the gateway dies, even by SIGKILL.
//! - `backoff.rs`: [`Starts`], exponential backoff for commands whose children die at
//!   start.
//! - `breach.rs`: [`Breach`], the bound a child reached.
//! - `error.rs`: [`ChildError`].

mod backoff;
mod breach;
mod cgroup;
mod check;
mod command;
mod contain;
mod error;
pub mod reaper;
mod tmp;
mod watch;

pub use backoff::{Record, Refused, Standing, Starts};
pub use breach::Breach;
pub use cgroup::{Cgroup, CgroupRoot, Cgroups, cgroup2_mount};
pub use command::Launch;
pub use contain::{Bind, Containment, Limits, Network, Sandbox};
pub use error::ChildError;
pub use reaper::Reaper;
pub use tmp::PrivateTmp;
pub use watch::{Watch, Watched};
