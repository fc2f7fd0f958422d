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
    };
    format!(
        "[[server]]\nname = \"{name}\"\ntransport = \"stdio\"\ncommand = {command}\nenv = {{ {MARK_VAR} = \"{mark}\" }}\n"
    )
}
