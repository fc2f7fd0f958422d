//! A sandboxed session's private `/tmp`: a directory of its own on the host (mode 0700),
//! bound at `/tmp` inside, removed when the child is reaped.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::ChildError;

/// The name of every private `/tmp` starts so.
const PREFIX: &str = "mcpgate-tmp-";

fn is_number(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// Whether `name` is `PREFIX`PID-N left by a gateway that is gone: PID no running process.
/// (Private `/tmp` directories and children's cgroups are named so.)
pub(crate) fn left_by_gone_gateway(name: &std::ffi::OsStr, prefix: &str) -> bool {
    name.to_str()
        .and_then(|n| n.strip_prefix(prefix))
        .and_then(|rest| rest.split_once('-'))
        .filter(|(pid, n)| is_number(pid) && is_number(n))
        .is_some_and(|(pid, _)| !Path::new("/proc").join(pid).exists())
}

/// One session's private `/tmp`; removed by [`PrivateTmp::remove`] (or, failing that,
/// when dropped).
#[derive(Debug)]
pub struct PrivateTmp {
    path: Option<PathBuf>,
}

impl PrivateTmp {
    /// Removes what a gateway that is gone left under `base` (a crash skips the removal
    /// at reaping): every `mcpgate-tmp-PID-N` directory whose PID is no running process.
    /// Returns how many it removed. Blocking; called once at start.
    pub fn sweep(base: &Path) -> usize {
        let Ok(dir) = std::fs::read_dir(base) else {
            return 0;
        };
        let mut removed = 0;
        for e in dir.flatten() {
            if left_by_gone_gateway(&e.file_name(), PREFIX)
                && e.file_type().is_ok_and(|t| t.is_dir())
                && std::fs::remove_dir_all(e.path()).is_ok()
            {
                removed += 1;
            }
        }
        removed
    }

    /// Creates `base/mcpgate-tmp-PID-N` (mode 0700).
    pub fn create(base: &Path) -> Result<PrivateTmp, ChildError> {
        use std::os::unix::fs::DirBuilderExt;
        static N: AtomicU64 = AtomicU64::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let path = base.join(format!("{PREFIX}{}-{n}", std::process::id()));
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&path)
            .map_err(|e| ChildError::PrivateTmp {
                path: path.clone(),
                source: Arc::new(e),
            })?;
        Ok(PrivateTmp { path: Some(path) })
    }

    /// Where it is on the host.
    pub fn path(&self) -> &Path {
        self.path.as_deref().unwrap_or(Path::new(""))
    }

    /// Removes it and everything in it, off the async threads.
    pub async fn remove(mut self) {
        if let Some(p) = self.path.take() {
            let shown = p.display().to_string();
            match tokio::task::spawn_blocking(move || std::fs::remove_dir_all(&p)).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    tracing::warn!(path = %shown, error = %e, "cannot remove a private /tmp")
                }
                Err(e) => tracing::warn!(path = %shown, error = %e, "cannot remove a private /tmp"),
            }
        }
    }
}

impl Drop for PrivateTmp {
    fn drop(&mut self) {
        if let Some(p) = self.path.take() {
            let _ = std::fs::remove_dir_all(p);
        }
    }
}
