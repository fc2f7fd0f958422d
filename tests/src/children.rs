//! stdio children as the host sees them: processes found by a mark in their environment
//! (inherited by every descendant, whatever its parent or process group), and stdio server
//! configs whose children misbehave on purpose (ignore EOF and SIGTERM, start a
//! grandchild, die at start).

use crate::gateway::bin;

/// The environment variable that marks a test's children.
pub const MARK_VAR: &str = "MCPGATE_TEST_MARK";

/// A mark unique to this test process and call.
pub fn mark(name: &str) -> String {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{name}-{}-{n}", std::process::id())
}

/// Live (not zombie) processes whose environment holds `MCPGATE_TEST_MARK=mark`.
pub fn marked(mark: &str) -> Vec<u32> {
    let needle = format!("{MARK_VAR}={mark}");
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in dir.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| {
                s.rsplit_once(')')
                    .map(|(_, r)| r.trim_start().starts_with('Z'))
            })
            .unwrap_or(true);
        if zombie {
            continue;
        }
        let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        if env.split(|b| *b == 0).any(|v| v == needle.as_bytes()) {
            out.push(pid);
        }
    }
    out
}

/// How a `[[server]]` of [`stdio_server`] behaves.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    /// The testkit itself.
    Plain,
    /// A shell that ignores SIGTERM and SIGHUP and keeps running after the testkit saw
    /// EOF on stdin.
    Stubborn,
    /// A shell that starts a grandchild (`sleep`) and then becomes the testkit.
    Family,
    /// A shell that starts a grandchild in a session of its own (`setsid sleep`: out of
    /// the child's process group, where only a cgroup reaches it) and then becomes the
    /// testkit.
    Detached,
}

/// A `[[server]]` named `name` running the testkit as `kind` says, its processes marked.
pub fn stdio_server(name: &str, kind: Kind, mark: &str) -> String {
    let tk = format!("{:?}", bin("mcpgate-testkit").display().to_string());
    let command = match kind {
        Kind::Plain => format!("[{tk}, \"stdio\"]"),
        Kind::Stubborn => {
            format!("[\"sh\", \"-c\", \"trap '' TERM HUP; \\\"$0\\\" stdio; sleep 600\", {tk}]")
        }
        Kind::Family => format!("[\"sh\", \"-c\", \"sleep 600 & exec \\\"$0\\\" stdio\", {tk}]"),
        Kind::Detached => {
            format!("[\"sh\", \"-c\", \"setsid sleep 600 & exec \\\"$0\\\" stdio\", {tk}]")
        }
    };
    format!(
        "[[server]]\nname = \"{name}\"\ntransport = \"stdio\"\ncommand = {command}\nenv = {{ {MARK_VAR} = \"{mark}\" }}\n"
    )
}

/// A scratch directory in this host's cgroup v2 hierarchy (the tests run as root, as a
/// gateway's service user owns its delegated subtree); what is left in it is killed and
/// it is removed when dropped.
#[derive(Debug)]
pub struct ScratchCgroup {
    /// Its directory.
    pub path: std::path::PathBuf,
}

impl ScratchCgroup {
    /// A new one named after `tag`.
    pub fn new(tag: &str) -> ScratchCgroup {
        let mount = mcpgate_child::cgroup2_mount().expect("a cgroup2 file system is mounted");
        let path = mount.join(format!("mcpgate-it-{}-{tag}", std::process::id()));
        std::fs::create_dir(&path).expect("the tests may create cgroups");
        ScratchCgroup { path }
    }

    /// The cgroups in it.
    pub fn children(&self) -> Vec<std::path::PathBuf> {
        std::fs::read_dir(&self.path)
            .map(|d| {
                d.flatten()
                    .map(|e| e.path())
                    .filter(|p| p.is_dir())
                    .collect()
            })
            .unwrap_or_default()
    }
}

impl Drop for ScratchCgroup {
    fn drop(&mut self) {
        for c in self.children() {
            let _ = std::fs::write(c.join("cgroup.kill"), "1");
            for _ in 0..100 {
                if std::fs::remove_dir(&c).is_ok() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
        }
        let _ = std::fs::remove_dir(&self.path);
    }
}

/// The cgroup v2 directory of `pid`, relative to the hierarchy's root ("" if gone).
pub fn cgroup_of(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("0::").map(str::to_owned))
        .unwrap_or_default()
}
