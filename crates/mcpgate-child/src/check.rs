//! Whether this host can contain a child as configured ([`Containment::check`], for
//! `--check-config` and start-up): limits above zero, sandbox paths that exist, and a
//! bubblewrap that can build the sandbox here.

use std::sync::Arc;

use crate::contain::{Containment, Sandbox};
use crate::error::ChildError;

impl Containment {
    /// Whether this host can contain a child so: the sandbox's program runs and can create
    /// its namespaces, every bound path exists, every limit is above zero. `at` names the
    /// server in errors. Runs a throwaway `bwrap … true` when sandboxed.
    pub fn check(&self, at: &str) -> Result<(), ChildError> {
        let l = &self.limits;
        let zero = [
            ("memory", l.memory == Some(0)),
            ("cpu", l.cpu.is_some_and(|d| d.as_secs() == 0)),
            ("processes", l.processes == Some(0)),
            ("open_files", l.open_files == Some(0)),
        ];
        if let Some((name, _)) = zero.iter().find(|(_, z)| *z) {
            return Err(ChildError::ZeroLimit {
                at: at.to_owned(),
                name,
            });
        }
        if let Some(n) = l.open_files.filter(|n| *n < MIN_OPEN_FILES) {
            return Err(ChildError::FewFiles {
                at: at.to_owned(),
                n,
            });
        }
        let Some(sb) = &self.sandbox else {
            return Ok(());
        };
        for b in &sb.binds {
            let why = if !b.path.is_absolute() {
                "is not absolute"
            } else if !b.path.exists() {
                "does not exist"
            } else {
                continue;
            };
            return Err(ChildError::BindPath {
                at: at.to_owned(),
                path: b.path.clone(),
                why,
            });
        }
        probe(at, sb)
    }
}

/// The fewest open files a child may be limited to (its stdio, the runtime's own).
pub(crate) const MIN_OPEN_FILES: u64 = 16;

/// Runs `bwrap` with the sandbox's namespaces around `true`: proves the program exists and
/// the kernel lets it build the sandbox (user namespaces on, no seccomp refusal).
fn probe(at: &str, sb: &Sandbox) -> Result<(), ChildError> {
    let mut args = crate::command::bwrap_args(sb, &std::env::temp_dir());
    args.extend(["--".into(), "true".into()]);
    let out = std::process::Command::new(&sb.bwrap)
        .args(&args)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| ChildError::NoSandbox {
            at: at.to_owned(),
            program: sb.bwrap.clone(),
            source: Arc::new(e),
        })?;
    if out.status.success() {
        return Ok(());
    }
    Err(ChildError::SandboxRefused {
        at: at.to_owned(),
        program: sb.bwrap.clone(),
        status: out.status,
        said: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
    })
}
