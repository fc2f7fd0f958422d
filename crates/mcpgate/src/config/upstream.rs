//! `[upstream]`: how mcpgate reaches its servers — connect and teardown timeouts, the
//! stdio children's limits, how long a learned protocol era is trusted.

use std::time::Duration;

use std::path::{Path, PathBuf};

use anyhow::bail;
use mcpgate_child::CgroupRoot;
use mcpgate_session::SessionConfig;
use mcpgate_upstream::Timeouts;
use serde::{Deserialize, Serialize};

/// `[upstream]` as written.
#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct RawUpstream {
    /// TCP connect to an HTTP upstream. Default 5s.
    #[serde(with = "humantime_serde")]
    pub(super) connect_timeout: Duration,
    /// The upstream DELETE at teardown. Default 5s.
    #[serde(with = "humantime_serde")]
    pub(super) delete_timeout: Duration,
    /// Stdio teardown: after closing stdin, and again after SIGTERM, before SIGKILL.
    /// Default 2s.
    #[serde(with = "humantime_serde")]
    pub(super) exit_grace: Duration,
    /// Stdio: a longer line from a child is logged and dropped (at least 1024). Default
    /// 4 MiB.
    pub(super) max_line_bytes: usize,
    /// Stdio processes alive at once (at least 1). Default 1000.
    pub(super) max_stdio_children: usize,
    /// How long a learned protocol era of an `auto` server is trusted (the session table's
    /// era cache). Default 10m.
    #[serde(with = "humantime_serde")]
    pub(super) protocol_cache: Duration,
    /// Stdio: a cgroup v2 directory to put each child in a cgroup of its own (killed
    /// whole, memory and process bounds held by the kernel): `"off"` (the default),
    /// `"delegated"` (the gateway's own cgroup, delegated to it by systemd's
    /// `Delegate=yes`: the gateway moves itself into its leaf `gateway`), or the absolute
    /// path of a cgroup v2 directory the gateway may manage and is not in.
    pub(super) stdio_cgroup: String,
}

impl Default for RawUpstream {
    fn default() -> Self {
        let t = Timeouts::default();
        RawUpstream {
            connect_timeout: t.connect,
            delete_timeout: t.delete,
            exit_grace: t.exit_grace,
            max_line_bytes: 4 * 1024 * 1024,
            max_stdio_children: 1000,
            protocol_cache: SessionConfig::default().era_ttl,
            stdio_cgroup: "off".into(),
        }
    }
}

/// `[upstream]` checked.
#[derive(Debug)]
pub(super) struct Upstream {
    /// The connector's timeouts.
    pub(super) timeouts: Timeouts,
    /// Longest stdio line.
    pub(super) max_line: usize,
    /// Stdio processes alive at once.
    pub(super) max_stdio_children: usize,
    /// Where the children's cgroups go.
    pub(super) cgroup: CgroupRoot,
}

impl RawUpstream {
    /// Checks the limits; `request` is `session.request_timeout`.
    pub(super) fn validate(self, request: Duration) -> anyhow::Result<Upstream> {
        if self.max_stdio_children == 0 {
            bail!("upstream.max_stdio_children must be at least 1");
        }
        if self.max_line_bytes < 1024 {
            bail!("upstream.max_line_bytes must be at least 1024");
        }
        let cgroup = match self.stdio_cgroup.as_str() {
            "off" => CgroupRoot::Off,
            "delegated" => CgroupRoot::Delegated,
            p if Path::new(p).is_absolute() => CgroupRoot::Path(PathBuf::from(p)),
            other => bail!(
                "upstream.stdio_cgroup {other:?} is not \"off\", \"delegated\" or an absolute path"
            ),
        };
        Ok(Upstream {
            timeouts: Timeouts {
                connect: self.connect_timeout,
                request,
                delete: self.delete_timeout,
                exit_grace: self.exit_grace,
            },
            max_line: self.max_line_bytes,
            max_stdio_children: self.max_stdio_children,
            cgroup,
        })
    }
}
