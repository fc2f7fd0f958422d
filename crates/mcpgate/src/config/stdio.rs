//! A stdio `[[server]]`'s `[server.sandbox]` and `[server.limits]` → its
//! [`Containment`], checked against this host (a sandbox bubblewrap cannot build here, a
//! path that does not exist, a limit of zero: each an error naming the key).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use mcpgate_child::{Bind, CgroupRoot, Cgroups, Containment, Limits, Network, Sandbox};
use mcpgate_compose::Backend;
use mcpgate_session::ServerSpec;
use mcpgate_upstream::Target;
use serde::{Deserialize, Serialize};

/// `[server.sandbox]` as written. Present (even empty) means sandboxed.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSandbox {
    /// Host paths shown read-only inside, at the same place (the program's own files: a
    /// `node_modules`, a virtualenv, data it serves). Default none.
    #[serde(default)]
    paths: Vec<PathBuf>,
    /// Host paths shown writable inside. Default none.
    #[serde(default)]
    writable: Vec<PathBuf>,
    /// `"off"` (the default: a network of its own, not even the host's loopback) or
    /// `"host"`.
    network: Option<String>,
    /// The bubblewrap program. Default `bwrap` (on `PATH`).
    bwrap: Option<PathBuf>,
}

/// `[server.limits]` as written; each absent key is no bound.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLimits {
    /// Resident memory of the child and everything it starts, in MiB.
    memory_mib: Option<u64>,
    /// CPU time of each of its processes ("30s", "5m").
    #[serde(default, with = "humantime_serde")]
    cpu: Option<Duration>,
    /// Processes and threads of the child and everything it starts.
    processes: Option<u64>,
    /// Open files per process.
    open_files: Option<u64>,
}

/// The containment of the stdio server `at`; checked on this host.
pub(super) fn containment(
    at: &str,
    sandbox: Option<&RawSandbox>,
    limits: Option<&RawLimits>,
) -> anyhow::Result<Containment> {
    let sandbox = sandbox.map(|s| sandbox_of(at, s)).transpose()?;
    let limits = limits.map_or_else(Limits::default, |l| Limits {
        memory: l.memory_mib.map(|m| m.saturating_mul(1 << 20)),
        cpu: l.cpu,
        processes: l.processes,
        open_files: l.open_files,
    });
    let c = Containment { sandbox, limits };
    c.check(at)?;
    Ok(c)
}

fn sandbox_of(at: &str, s: &RawSandbox) -> anyhow::Result<Sandbox> {
    let network = match s.network.as_deref() {
        None | Some("off") => Network::Off,
        Some("host") => Network::Host,
        Some(other) => anyhow::bail!("{at}: sandbox.network {other:?} is not \"off\" or \"host\""),
    };
    let binds = s
        .paths
        .iter()
        .map(|p| (p, false))
        .chain(s.writable.iter().map(|p| (p, true)))
        .map(|(path, writable)| Bind {
            path: path.clone(),
            writable,
        })
        .collect();
    Ok(Sandbox {
        binds,
        network,
        bwrap: s.bwrap.clone().unwrap_or_else(|| PathBuf::from("bwrap")),
    })
}

/// The warm children of every stdio server fit under `upstream.max_stdio_children`.
pub(super) fn warm_fits(servers: &[ServerSpec], max: usize) -> anyhow::Result<()> {
    let warm: Vec<(&str, usize)> = servers
        .iter()
        .filter_map(|s| match &s.backend {
            Backend::Server(Target::Stdio { warm, .. }) if *warm > 0 => {
                Some((s.name.as_str(), *warm))
            }
            _ => None,
        })
        .collect();
    let total: usize = warm.iter().map(|(_, n)| n).sum();
    if total > max {
        let each: Vec<String> = warm.iter().map(|(s, n)| format!("{s}: {n}")).collect();
        anyhow::bail!(
            "warm stdio children ({total}: {}) exceed upstream.max_stdio_children = {max}",
            each.join(", ")
        );
    }
    Ok(())
}

/// The children's cgroups: `root` opened (a cgroup v2 directory the gateway can use), and
/// a warning for each server bound the subtree has no controller for (the sampler holds
/// it then).
pub(super) fn cgroups(
    root: &CgroupRoot,
    servers: &[ServerSpec],
    warnings: &mut Vec<String>,
) -> anyhow::Result<Option<Arc<Cgroups>>> {
    let Some(cgroups) = root.open()? else {
        return Ok(None);
    };
    let path = cgroups.root();
    for s in servers {
        if let Backend::Server(Target::Stdio { contain, .. }) = &s.backend {
            let missing = cgroups.missing(&contain.limits);
            if !missing.is_empty() {
                warnings.push(format!(
                    "server {:?}: limits {} are held by the gateway's sampler, not the kernel: \
                     cgroup {} has no {} controller (enable it in its parent's \
                     cgroup.subtree_control)",
                    s.name,
                    missing.join(", "),
                    path.display(),
                    missing
                        .iter()
                        .map(|m| if *m == "processes" { "pids" } else { *m })
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
        }
    }
    Ok(Some(Arc::new(cgroups)))
}
