//! The cgroup v2 side on this host's real hierarchy (the tests run as root, as the
//! gateway's delegated user would own its subtree).

use super::*;
use crate::contain::Containment;

/// A fresh directory under the cgroup2 mount, removed at the end.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        let mount = cgroup2_mount().expect("a cgroup2 file system is mounted here");
        let p = mount.join(format!("mcpgate-unit-{}-{tag}", std::process::id()));
        std::fs::create_dir(&p).expect("the tests may create cgroups");
        Scratch(p)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if let Ok(d) = std::fs::read_dir(&self.0) {
            for e in d.flatten().filter(|e| e.path().is_dir()) {
                kill_dir(&e.path());
                remove_dir(&e.path(), Duration::from_secs(1));
            }
        }
        let _ = std::fs::remove_dir(&self.0);
    }
}

fn cgroup_of(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("0::").map(str::to_owned))
        .unwrap_or_default()
}

#[test]
fn refuses_a_directory_that_is_no_cgroup() {
    let dir = std::env::temp_dir();
    let e = Cgroups::open(&dir).expect_err("a plain directory is no cgroup");
    assert!(
        e.to_string().contains("is not a cgroup v2 directory"),
        "{e}"
    );
}

#[test]
fn reads_flat_keyed_counters() {
    let dir = std::env::temp_dir().join(format!("mcpgate-events-{}", std::process::id()));
    std::fs::write(&dir, "low 0\nhigh 3\nmax 2\noom 1\noom_kill 1\n").expect("write");
    assert_eq!(event(&dir, "oom_kill"), 1);
    assert_eq!(event(&dir, "high"), 3);
    assert_eq!(event(&dir, "absent"), 0);
    let _ = std::fs::remove_file(&dir);
}

#[tokio::test]
async fn a_child_and_what_it_detaches_live_in_its_cgroup_and_die_with_it() {
    let scratch = Scratch::new("life");
    let cgroups = Cgroups::open(&scratch.0).expect("the scratch directory is usable");
    let cg = cgroups
        .create(&Limits::default())
        .expect("a child's cgroup");
    let contain = Containment::default();
    let args = vec![
        "-c".to_owned(),
        // A grandchild that leaves the process group (its own session), then waits.
        "setsid sleep 300 & echo $!; exec sleep 300".to_owned(),
    ];
    let env = std::collections::BTreeMap::new();
    let launch = crate::command::Launch {
        program: "sh",
        args: &args,
        env: &env,
        env_clear: false,
        cwd: None,
        contain: &contain,
        tmp: None,
        cgroup: Some(&cg),
    };
    let mut child = launch.command().spawn().expect("sh starts");
    let pid = child.id().expect("a pid");
    let mut out = child.stdout.take().expect("stdout");
    let mut line = String::new();
    use tokio::io::AsyncBufReadExt;
    tokio::io::BufReader::new(&mut out)
        .read_line(&mut line)
        .await
        .expect("the grandchild's pid");
    let grandchild: u32 = line.trim().parse().expect("a pid");
    let name = cg.path().file_name().and_then(|n| n.to_str()).unwrap_or("");
    assert!(cgroup_of(pid).ends_with(name), "{}", cgroup_of(pid));
    assert!(
        cgroup_of(grandchild).ends_with(name),
        "the detached grandchild is in the child's cgroup too: {}",
        cgroup_of(grandchild)
    );
    let path = cg.path().to_owned();
    cg.remove().await;
    let _ = child.wait().await;
    let until = Instant::now() + Duration::from_secs(2);
    while Path::new(&format!("/proc/{grandchild}")).exists() && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let state = std::fs::read_to_string(format!("/proc/{grandchild}/stat")).unwrap_or_default();
    assert!(
        state.is_empty() || state.contains(") Z"),
        "the detached grandchild was killed with the cgroup: {state}"
    );
    assert!(!path.exists(), "the child's cgroup is removed");
}

#[test]
fn sweeps_what_a_gone_gateway_left_and_nothing_else() {
    let scratch = Scratch::new("sweep");
    let cgroups = Cgroups::open(&scratch.0).expect("usable");
    // No process has a PID above pid_max (2^22); ours is running.
    let stale = scratch.0.join("mcpgate-999999999-0");
    let ours = cgroups.create(&Limits::default()).expect("ours");
    std::fs::create_dir(&stale).expect("a stale cgroup");
    assert_eq!(cgroups.sweep(), 1);
    assert!(!stale.exists());
    assert!(ours.path().exists(), "a live gateway's cgroup stays");
}

#[test]
fn holds_only_the_bounds_it_has_controllers_for() {
    let c = Cgroups {
        root: PathBuf::from("/x"),
        memory: true,
        pids: false,
    };
    let l = Limits {
        memory: Some(1 << 26),
        processes: Some(10),
        cpu: Some(Duration::from_secs(5)),
        open_files: Some(64),
    };
    let held = c.holds(&l);
    assert_eq!(held.memory, Some(1 << 26));
    assert_eq!(held.processes, None);
    assert_eq!(
        (held.cpu, held.open_files),
        (None, None),
        "rlimits stay rlimits"
    );
    assert_eq!(c.missing(&l), vec!["processes"]);
}
