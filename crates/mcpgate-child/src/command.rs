//! The command line that starts a child: the program itself, or bubblewrap around it;
//! its environment; its rlimits, set between fork and exec.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::os::fd::{BorrowedFd, RawFd};
use std::path::Path;
use std::process::Stdio;

use nix::sys::resource::{Resource, setrlimit};
use nix::unistd::setsid;
use tokio::process::Command;

use crate::cgroup::Cgroup;
use crate::contain::{Containment, ETC_PATHS, Network, SYSTEM_PATHS, Sandbox};

/// What starts one child.
#[derive(Debug)]
pub struct Launch<'a> {
    /// The program.
    pub program: &'a str,
    /// Its arguments.
    pub args: &'a [String],
    /// Extra environment variables (after the inherited or scrubbed base).
    pub env: &'a BTreeMap<String, String>,
    /// Start from an empty environment (only `env`) instead of the gateway's.
    pub env_clear: bool,
    /// The working directory (inside the sandbox, when sandboxed).
    pub cwd: Option<&'a str>,
    /// Its sandbox and limits.
    pub contain: &'a Containment,
    /// The session's private `/tmp` (sandboxed children only).
    pub tmp: Option<&'a Path>,
    /// The child's own cgroup, entered before the program starts.
    pub cgroup: Option<&'a Cgroup>,
}

/// The variables a sandboxed child gets from the gateway's environment (when set);
/// everything else is dropped, and `HOME` and `TMPDIR` point at its private `/tmp`.
const SANDBOX_INHERIT: &[&str] = &["PATH", "LANG", "LC_ALL", "TERM", "USER", "LOGNAME", "TZ"];

impl Launch<'_> {
    /// The command: piped stdio, its own session and so its own process group (teardown
    /// reaches grandchildren: npx → node; no controlling terminal to write keystrokes
    /// into), killed if dropped, rlimits applied before the program starts.
    pub fn command(&self) -> Command {
        let mut cmd = match (&self.contain.sandbox, self.tmp) {
            (Some(sb), Some(tmp)) => self.sandboxed(sb, tmp),
            _ => self.plain(),
        };
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        before_exec(
            &mut cmd,
            self.contain,
            self.cgroup.and_then(Cgroup::procs_fd),
        );
        cmd
    }

    fn plain(&self) -> Command {
        let mut cmd = Command::new(self.program);
        if self.env_clear {
            cmd.env_clear();
        }
        cmd.args(self.args).envs(self.env);
        if let Some(cwd) = self.cwd {
            cmd.current_dir(cwd);
        }
        cmd
    }

    fn sandboxed(&self, sb: &Sandbox, tmp: &Path) -> Command {
        let mut cmd = Command::new(&sb.bwrap);
        cmd.env_clear();
        if !self.env_clear {
            for k in SANDBOX_INHERIT {
                if let Some(v) = std::env::var_os(k) {
                    cmd.env(k, v);
                }
            }
        }
        cmd.env("HOME", "/tmp").env("TMPDIR", "/tmp").envs(self.env);
        let mut args = bwrap_args(sb, tmp);
        if let Some(cwd) = self.cwd {
            args.extend(["--chdir".into(), cwd.into()]);
        }
        args.push("--".into());
        args.push(self.program.into());
        args.extend(self.args.iter().map(OsString::from));
        cmd.args(args);
        cmd
    }
}

/// bubblewrap's options for `sb`, with `tmp` as the private `/tmp` (without the command).
pub(crate) fn bwrap_args(sb: &Sandbox, tmp: &Path) -> Vec<OsString> {
    let mut a: Vec<OsString> = vec![
        "--die-with-parent".into(),
        "--unshare-all".into(),
        "--cap-drop".into(),
        "ALL".into(),
    ];
    if sb.network == Network::Host {
        a.push("--share-net".into());
    }
    for p in SYSTEM_PATHS.iter().chain(ETC_PATHS) {
        let path = Path::new(p);
        match std::fs::read_link(path) {
            // /bin → usr/bin on a merged-/usr system: the same link inside.
            Ok(target) if SYSTEM_PATHS.contains(p) => {
                a.extend(["--symlink".into(), target.into(), path.into()]);
            }
            _ if path.exists() => a.extend(["--ro-bind".into(), path.into(), path.into()]),
            _ => {}
        }
    }
    a.extend([
        "--proc".into(),
        "/proc".into(),
        "--dev".into(),
        "/dev".into(),
        "--bind".into(),
        tmp.into(),
        "/tmp".into(),
    ]);
    for b in &sb.binds {
        let how = if b.writable { "--bind" } else { "--ro-bind" };
        a.extend([how.into(), b.path.clone().into(), b.path.clone().into()]);
    }
    a
}

/// Between fork and exec: a new session (its process group id is its pid, as the
/// sampler and the reaper expect), its cgroup (`procs`, that cgroup's open
/// `cgroup.procs`), then the kernel-enforced limits, which the program and everything it
/// starts inherit.
fn before_exec(cmd: &mut Command, contain: &Containment, procs: Option<RawFd>) {
    let mut set: Vec<(Resource, u64, u64)> = Vec::new();
    if let Some(cpu) = contain.limits.cpu {
        // SIGXCPU at the limit, SIGKILL a second later if it is ignored.
        set.push((Resource::RLIMIT_CPU, cpu.as_secs(), cpu.as_secs() + 1));
    }
    if let Some(n) = contain.limits.open_files {
        set.push((Resource::RLIMIT_NOFILE, n, n));
    }
    // SAFETY: the hook runs in the forked child before exec; it only calls setsid(2),
    // write(2) and setrlimit(2), all async-signal-safe, on a vector allocated before the
    // fork, and allocates nothing itself. `procs` stays open until the spawn returns (the
    // caller holds its cgroup), and is close-on-exec, so the program never sees it.
    #[allow(unsafe_code)]
    unsafe {
        cmd.pre_exec(move || {
            setsid()?;
            if let Some(fd) = procs {
                // Writing 0 moves the writer: this process, before it runs anything.
                nix::unistd::write(BorrowedFd::borrow_raw(fd), b"0")?;
            }
            for (r, soft, hard) in &set {
                setrlimit(*r, *soft, *hard)?;
            }
            Ok(())
        });
    }
}
