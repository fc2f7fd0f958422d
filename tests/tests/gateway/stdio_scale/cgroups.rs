//! `upstream.stdio_cgroup`: each stdio child in a cgroup of its own, on this host's real
//! cgroup v2 hierarchy. A grandchild that left its process group (`setsid`) is out of
//! reach of process-group signals; its cgroup still holds it, so it ends with its
//! session, with a SIGKILLed gateway, or at the next gateway's start.

use std::collections::BTreeSet;
use std::process::Command;
use std::time::Duration;

use mcpgate_tests::children::{Kind, ScratchCgroup, cgroup_of, mark, marked, stdio_server};
use mcpgate_tests::{Client, Gateway, Launch, check_config, wait_until};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

fn upstream(root: &ScratchCgroup) -> String {
    format!(
        "[upstream]\nstdio_cgroup = {:?}\nexit_grace = \"300ms\"\n",
        root.path.display().to_string()
    )
}

/// The distinct cgroups the marked processes are in.
fn cgroups_of(m: &str) -> BTreeSet<String> {
    marked(m).into_iter().map(cgroup_of).collect()
}

#[tokio::test]
async fn each_child_has_its_own_cgroup_and_a_session_s_end_takes_all_of_it() {
    let root = ScratchCgroup::new("sessions");
    let (a, b, other) = (mark("cg-a"), mark("cg-b"), mark("cg-other"));
    let toml = [
        stdio_server("a", Kind::Detached, &a),
        stdio_server("b", Kind::Detached, &b),
        stdio_server("bystander", Kind::Plain, &other),
        upstream(&root),
    ]
    .concat();
    let gw = Gateway::start(&toml);
    let sa = Client::new(&format!("{}/servers/a/mcp", gw.base))
        .initialize()
        .await;
    let _sb = Client::new(&format!("{}/servers/b/mcp", gw.base))
        .initialize()
        .await;
    let bystander = Client::new(&format!("{}/servers/bystander/mcp", gw.base))
        .initialize()
        .await;
    let up = wait_until(Duration::from_secs(5), || async {
        marked(&a).len() == 2 && marked(&b).len() == 2 && marked(&other).len() == 1
    })
    .await;
    assert!(
        up,
        "a testkit and a detached sleep per session; log:\n{}",
        gw.log()
    );
    let name = root.path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    for m in [&a, &b, &other] {
        let groups = cgroups_of(m);
        assert_eq!(
            groups.len(),
            1,
            "one cgroup per child, descendants in it: {groups:?}"
        );
        let g = groups.iter().next().cloned().unwrap_or_default();
        assert!(g.contains(&format!("/{name}/mcpgate-")), "{g}");
    }
    assert_eq!(root.children().len(), 3, "three children, three cgroups");
    assert_ne!(cgroups_of(&a), cgroups_of(&b));

    assert_eq!(sa.delete().await, 200);
    let gone = wait_until(Duration::from_secs(5), || async { marked(&a).is_empty() }).await;
    assert!(
        gone,
        "the detached grandchild went with its session: {:?}",
        marked(&a)
    );
    let removed = wait_until(Duration::from_secs(5), || async {
        root.children().len() == 2
    })
    .await;
    assert!(removed, "its cgroup is removed: {:?}", root.children());
    assert_eq!(
        marked(&b).len(),
        2,
        "the other session's processes are untouched"
    );
    let r = bystander
        .call("echo", serde_json::json!({"text": "still here"}))
        .await;
    assert_eq!(r.text(), "still here");
}

#[tokio::test]
async fn sigkill_of_the_gateway_ends_every_child_s_cgroup() {
    let root = ScratchCgroup::new("sigkill");
    let m = mark("cg-kill");
    let mut gw = Gateway::start(&(stdio_server("d", Kind::Detached, &m) + &upstream(&root)));
    let c = Client::new(&format!("{}/servers/d/mcp", gw.base));
    let mut sessions = Vec::new();
    for _ in 0..10 {
        sessions.push(c.initialize().await);
    }
    assert!(wait_until(Duration::from_secs(10), || async { marked(&m).len() == 20 }).await);
    kill(Pid::from_raw(gw.pid() as i32), Signal::SIGKILL).unwrap();
    let gone = wait_until(Duration::from_secs(2), || async { marked(&m).is_empty() }).await;
    assert!(
        gone,
        "{} processes outlived the gateway by 2 s; log:\n{}",
        marked(&m).len(),
        gw.log()
    );
    let removed = wait_until(Duration::from_secs(2), || async {
        root.children().is_empty()
    })
    .await;
    assert!(
        removed,
        "the reaper removes the cgroups: {:?}",
        root.children()
    );
    assert!(!gw.is_running());
}

#[tokio::test]
async fn a_new_gateway_ends_what_a_gone_one_left_in_its_cgroups() {
    let root = ScratchCgroup::new("sweep");
    let m = mark("cg-stale");
    // A cgroup as a gateway with a PID above pid_max would have left it, a process in it.
    let stale = root.path.join("mcpgate-999999999-0");
    std::fs::create_dir(&stale).unwrap();
    let mut sleeper = Command::new("sleep")
        .arg("600")
        .env(mcpgate_tests::children::MARK_VAR, &m)
        .spawn()
        .unwrap();
    std::fs::write(stale.join("cgroup.procs"), sleeper.id().to_string()).unwrap();
    let gw =
        Gateway::start(&(stdio_server("p", Kind::Plain, &mark("cg-fresh")) + &upstream(&root)));
    let _ = sleeper.wait();
    assert!(
        marked(&m).is_empty(),
        "the stale cgroup's process is killed"
    );
    assert!(!stale.exists(), "and the stale cgroup removed");
    assert!(gw.log().contains("cgroups=1"), "{}", gw.log());
}

#[tokio::test]
async fn delegated_the_gateway_steps_into_a_leaf_and_its_children_go_beside_it() {
    // As systemd starts a `Delegate=yes` service: in a cgroup of its own.
    let service = ScratchCgroup::new("delegated");
    let m = mark("cg-delegated");
    let toml = stdio_server("d", Kind::Detached, &m) + "[upstream]\nstdio_cgroup = \"delegated\"\n";
    let mut gw = Gateway::launch(
        &toml,
        Launch {
            cgroup: Some(service.path.clone()),
            ..Launch::default()
        },
    );
    let name = service
        .path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("");
    assert!(
        cgroup_of(gw.pid()).ends_with(&format!("/{name}/gateway")),
        "the gateway moved itself aside: {}",
        cgroup_of(gw.pid())
    );
    let s = Client::new(&format!("{}/servers/d/mcp", gw.base))
        .initialize()
        .await;
    assert!(wait_until(Duration::from_secs(5), || async { marked(&m).len() == 2 }).await);
    let groups = cgroups_of(&m);
    assert_eq!(groups.len(), 1, "{groups:?}");
    assert!(
        groups
            .iter()
            .all(|g| g.contains(&format!("/{name}/mcpgate-"))),
        "the child's cgroup is beside the gateway's leaf: {groups:?}"
    );
    assert_eq!(s.delete().await, 200);
    assert!(wait_until(Duration::from_secs(5), || async { marked(&m).is_empty() }).await);
    assert_eq!(service.children(), vec![service.path.join("gateway")]);
    gw.stop();
}

#[test]
fn check_config_names_a_cgroup_it_cannot_use_and_bounds_it_cannot_give_the_kernel() {
    let root = ScratchCgroup::new("check");
    let server = "[[server]]\nname = \"s\"\ntransport = \"stdio\"\ncommand = [\"x\"]\n";
    let with =
        |cg: &str, extra: &str| format!("{server}{extra}[upstream]\nstdio_cgroup = {cg:?}\n");
    let cases = [
        ("/tmp", "cgroup /tmp: is not a cgroup v2 directory"),
        (
            "/no/such/cgroup",
            "cgroup /no/such/cgroup: is not a cgroup v2 directory",
        ),
        (
            "relative",
            "upstream.stdio_cgroup \"relative\" is not \"off\", \"delegated\" or an absolute path",
        ),
    ];
    for (cg, said) in cases {
        let (code, out) = check_config(&with(cg, ""));
        assert_ne!(code, 0, "{cg}: {out}");
        assert!(out.contains(said), "{cg}: expected {said:?} in {out}");
    }
    let usable = root.path.display().to_string();
    let (code, out) = check_config(&with(&usable, ""));
    assert_eq!(code, 0, "a usable subtree: {out}");
    // This host's cgroup v2 hierarchy has neither the memory nor the pids controller
    // (they are bound to cgroup v1): the bounds stay with the sampler, and it is said.
    let controllers = std::fs::read_to_string(root.path.join("cgroup.controllers")).unwrap();
    let limits = "[server.limits]\nmemory_mib = 64\nprocesses = 32\n";
    let (code, out) = check_config(&with(&usable, limits));
    assert_eq!(code, 0, "{out}");
    let missing: Vec<&str> = ["memory", "pids"]
        .into_iter()
        .filter(|c| !controllers.split_whitespace().any(|x| x == *c))
        .collect();
    if missing.len() == 2 {
        assert!(
            out.contains("limits memory, processes are held by the gateway's sampler")
                && out.contains("has no memory, pids controller"),
            "{out}"
        );
    } else {
        assert!(
            !out.contains("held by the gateway's sampler"),
            "{controllers}: {out}"
        );
    }
}
