//! The Kubernetes router config (`deploy/kubernetes/gateway/router-config.yaml`) in a real
//! nginx in front of three replicas with the StatefulSet's replica ids.
//!
//! Needs the `nginx` binary, like `shipped_nginx.rs`.

use std::time::Duration;

use futures::future::join_all;
use mcpgate_testkit::{HttpOptions, HttpServer};
use mcpgate_tests::nginx::{Nginx, configmap_entry, host_port, repo_file};
use mcpgate_tests::{Client, Gateway, wait_until};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::json;

/// The Kubernetes router config (`deploy/kubernetes/gateway/router-config.yaml`) routes the
/// same way with the StatefulSet's replica ids (`mcpgate_0`, `mcpgate_1`, `mcpgate_2`): its
/// pod DNS names are replaced by loopback replicas, and `resolve` (nginx >= 1.27.3, only
/// useful with DNS names) is dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kubernetes_router_config_routes_to_the_statefulset_replicas() {
    const IDS: [&str; 3] = ["mcpgate_0", "mcpgate_1", "mcpgate_2"];
    let upstream = HttpServer::start("127.0.0.1:0".parse().unwrap(), HttpOptions::default())
        .await
        .unwrap();
    let mut replicas: Vec<Gateway> = IDS
        .iter()
        .map(|id| {
            Gateway::http(
                &upstream.url(),
                &format!("[listen]\nreplica_id = \"{id}\"\ndrain = \"2s\"\n"),
            )
        })
        .collect();
    let mut replacements: Vec<(String, String)> = vec![
        (" resolve;".into(), ";".into()),
        (" resolve max_fails".into(), " max_fails".into()),
        (
            "resolver kube-dns.kube-system.svc.cluster.local".into(),
            "resolver 127.0.0.1".into(),
        ),
    ];
    for (i, r) in replicas.iter().enumerate() {
        replacements.push((
            format!("mcpgate-{i}.mcpgate-replicas.mcpgate.svc.cluster.local:8080"),
            host_port(&r.base),
        ));
    }
    let source = "deploy/kubernetes/gateway/router-config.yaml";
    let nginx = Nginx::start(
        source,
        &configmap_entry(&repo_file(source), "mcpgate.conf"),
        &replacements,
    )
    .await;
    let via = Client::new(&format!("{}/mcp", nginx.base));
    let index = |id: &str| {
        IDS.iter()
            .position(|r| id.strip_prefix(r).is_some_and(|rest| rest.starts_with('-')))
            .unwrap_or_else(|| panic!("session id {id} names no replica of {IDS:?}"))
    };

    let sessions = join_all((0..30).map(|_| via.initialize())).await;
    let mut counts = [0usize; 3];
    // Each session's upstream session id, as `whoami` tells it.
    let mut upstream_of = std::collections::HashMap::new();
    for s in &sessions {
        counts[index(&s.id)] += 1;
        let through = s.call("whoami", json!({})).await;
        assert_eq!(through.status, 200, "{through:?}");
        upstream_of.insert(s.id.clone(), through.text());
        let at_owner = Client::new(&replicas[index(&s.id)].url())
            .call_on(&s.id, "whoami", json!({}))
            .await;
        assert_eq!(
            through.text(),
            at_owner.text(),
            "{} through the router reaches its owner",
            s.id
        );
    }
    eprintln!("30 sessions through the Kubernetes router config: {counts:?}");
    assert!(counts.iter().all(|&n| n >= 5), "round-robin: {counts:?}");

    // mcpgate-1 dies: its sessions are told to re-initialise and land on 0 or 2; the others
    // keep working.
    kill(Pid::from_raw(replicas[1].pid() as i32), Signal::SIGKILL).unwrap();
    assert!(
        wait_until(Duration::from_secs(5), || {
            let running = replicas[1].is_running();
            async move { !running }
        })
        .await
    );
    for s in &sessions {
        let r = s.call("whoami", json!({})).await;
        if index(&s.id) == 1 {
            assert_eq!((r.status, r.error_code()), (404, Some(-32001)), "{r:?}");
            let again = via.initialize().await;
            assert_ne!(index(&again.id), 1, "{}", again.id);
            let whoami = again.call("whoami", json!({})).await;
            assert!(whoami.error_code().is_none());
            // A new session has a new upstream session, and its owner knows it.
            let at_owner = Client::new(&replicas[index(&again.id)].url())
                .call_on(&again.id, "whoami", json!({}))
                .await;
            assert_eq!(whoami.text(), at_owner.text(), "{}", again.id);
            assert!(
                !upstream_of.values().any(|u| *u == whoami.text()),
                "{}: a fresh upstream session, not an old one: {whoami:?}",
                again.id
            );
        } else {
            assert!(
                r.status == 200 && r.error_code().is_none(),
                "{}: {r:?}\n{}",
                s.id,
                nginx.error_log()
            );
            assert_eq!(
                r.text(),
                upstream_of[&s.id],
                "{}: still its own upstream session",
                s.id
            );
        }
    }
    drop(nginx);
}
