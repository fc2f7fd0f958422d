//! The official SDK clients in every version-negotiation mode, directly and through
//! mcpgate, against servers that speak 2026-07-28 (TypeScript SDK 2.4 over HTTP, Python
//! SDK 2.3 over HTTP and stdio, TypeScript over stdio): through the gateway every client
//! negotiates the revision it negotiates directly — no silent downgrade — and gets every
//! progress and log notification of its call exactly once. Against the session-era
//! everything server, every mode that works directly still works.

use mcpgate_tests::modern::{self, Mode, Sdk, Target};
use mcpgate_tests::{Gateway, children_of, wait_until};
use serde_json::Value;

const CELLS: [(Sdk, Mode); 6] = [
    (Sdk::Ts, Mode::Legacy),
    (Sdk::Ts, Mode::Auto),
    (Sdk::Ts, Mode::Pin),
    (Sdk::Py, Mode::Legacy),
    (Sdk::Py, Mode::Auto),
    (Sdk::Py, Mode::Pin),
];

fn stdio_gateway(cmd: &[String]) -> Gateway {
    let quoted: Vec<String> = cmd.iter().map(|c| format!("{c:?}")).collect();
    Gateway::start(&format!(
        "[[server]]\nname = \"up\"\ntransport = \"stdio\"\ncommand = [{}]\n",
        quoted.join(", ")
    ))
}

fn summary(v: &Value) -> String {
    format!(
        "ok={} version={} notify={} error={}",
        v["ok"], v["protocolVersion"], v["notify"], v["error"]
    )
}

/// Runs every cell directly and through the gateway and compares.
async fn compare(direct: Target, gw: &Gateway) {
    let via = Target::Url(gw.url());
    for (sdk, mode) in CELLS {
        // Elicitation through input_required is a 2026-07-28 thing here (the TS server's
        // session-era leg is stateless and cannot send requests).
        let extra: &[&str] = if mode == Mode::Legacy {
            &[]
        } else {
            &["--elicit", "42"]
        };
        let d = modern::client(sdk, mode, &direct, extra).await;
        let g = modern::client(sdk, mode, &via, extra).await;
        let cell = format!(
            "{sdk:?} {mode:?}: direct [{}] gateway [{}]",
            summary(&d),
            summary(&g)
        );
        assert_eq!(d["ok"], true, "{cell}");
        assert_eq!(g["ok"], true, "{cell}");
        assert_eq!(
            d["protocolVersion"], g["protocolVersion"],
            "same revision: {cell}"
        );
        let expected = if mode == Mode::Legacy {
            "2025-11-25"
        } else {
            "2026-07-28"
        };
        assert_eq!(g["protocolVersion"], expected, "{cell}");
        assert_eq!(g["notify"]["progress"], 5, "{cell}");
        assert_eq!(g["notify"]["logs"], 5, "{cell}");
        assert_eq!(g["notify"]["duplicates"], 0, "{cell}");
        assert_eq!(g["resource"], "static resource", "{cell}");
        if mode != Mode::Legacy {
            assert_eq!(g["elicit"], "42", "input_required passed through: {cell}");
        }
    }
}

#[tokio::test]
async fn every_mode_against_the_typescript_server_over_http() {
    let up = modern::start_http(Sdk::Ts, &[]).await;
    let gw = Gateway::http(&up.url, "");
    compare(Target::Url(up.url.clone()), &gw).await;
    assert!(gw.metric("mcpgate_requests_total{era=\"2026\"}").await > 0.0);
    assert_eq!(
        gw.metric("mcpgate_server_era{server=\"up\",era=\"2026\"}")
            .await,
        1.0
    );
}

#[tokio::test]
async fn every_mode_against_the_python_server_over_http() {
    let up = modern::start_http(Sdk::Py, &[]).await;
    let gw = Gateway::http(&up.url, "");
    compare(Target::Url(up.url.clone()), &gw).await;
}

#[tokio::test]
async fn every_mode_against_the_python_server_over_stdio() {
    let cmd = modern::server_command(Sdk::Py, "stdio", &[]);
    let gw = stdio_gateway(&cmd);
    compare(Target::Stdio(cmd), &gw).await;
    assert_stdio_children_end(gw).await;
}

#[tokio::test]
async fn every_mode_against_the_typescript_server_over_stdio() {
    let cmd = modern::server_command(Sdk::Ts, "stdio", &[]);
    let gw = stdio_gateway(&cmd);
    compare(Target::Stdio(cmd), &gw).await;
    assert_stdio_children_end(gw).await;
}

/// Pooled children end with the gateway (SIGTERM drain), none left behind.
async fn assert_stdio_children_end(mut gw: Gateway) {
    let pid = gw.pid();
    assert_eq!(gw.stop(), Some(0));
    assert!(
        wait_until(std::time::Duration::from_secs(5), || async {
            children_of(pid).is_empty()
        })
        .await
    );
}

/// A 2026-07-28-only server with `bridge = false`: session-era clients fail directly and
/// through the gateway alike; modern clients work through it. (With the era bridge, the
/// default, session-era clients work through it: `bridge_reverse.rs`.)
#[tokio::test]
async fn a_modern_only_server_fails_legacy_clients_the_same_way() {
    let up = modern::start_http(Sdk::Ts, &["--modern-only"]).await;
    let gw = Gateway::http(&up.url, "bridge = false\n");
    for (sdk, mode) in CELLS {
        let d = modern::client(sdk, mode, &Target::Url(up.url.clone()), &[]).await;
        let g = modern::client(sdk, mode, &Target::Url(gw.url()), &[]).await;
        let cell = format!(
            "{sdk:?} {mode:?}: direct [{}] gateway [{}]",
            summary(&d),
            summary(&g)
        );
        assert_eq!(d["ok"], g["ok"], "{cell}");
        assert_eq!(d["protocolVersion"], g["protocolVersion"], "{cell}");
        // Which cells: a session-era (initialize-only) client fails both ways — through
        // the gateway too, since bridge = false — and the modes that speak 2026-07-28 work
        // both ways, on 2026-07-28. (A fixture that ignored --modern-only would let the
        // legacy cells work directly, and this fails.)
        let modern = mode != Mode::Legacy;
        assert_eq!(d["ok"], modern, "{cell}");
        assert_eq!(g["ok"], modern, "{cell}");
        if modern {
            assert_eq!(g["protocolVersion"], "2026-07-28", "{cell}");
        } else {
            assert!(g["error"].is_string(), "the failure says why: {cell}");
        }
    }
}

/// The session-era everything server: every mode that works directly works through the
/// gateway. With the era bridge (the default) the modes that can speak 2026-07-28 (auto,
/// pinned) do so through it — the pinned ones, which fail directly, work; with
/// `bridge = false` every cell negotiates what it negotiates directly, and the pinned
/// modes fail both ways.
#[tokio::test]
async fn every_mode_against_the_session_era_everything_server() {
    let launcher = std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/clients/everything_server.mjs"
    ));
    let cmd = vec![
        "node".to_owned(),
        launcher.display().to_string(),
        "stdio".to_owned(),
    ];
    let gw = stdio_gateway(&cmd);
    let plain = {
        let quoted: Vec<String> = cmd.iter().map(|c| format!("{c:?}")).collect();
        Gateway::start(&format!(
            "[[server]]\nname = \"up\"\ntransport = \"stdio\"\ncommand = [{}]\nbridge = false\n",
            quoted.join(", ")
        ))
    };
    for (sdk, mode) in CELLS {
        let d = modern::client(sdk, mode, &Target::Stdio(cmd.clone()), &["--everything"]).await;
        let g = modern::client(sdk, mode, &Target::Url(gw.url()), &["--everything"]).await;
        let p = modern::client(sdk, mode, &Target::Url(plain.url()), &["--everything"]).await;
        let cell = format!(
            "{sdk:?} {mode:?}: direct [{}] bridged [{}] unbridged [{}]",
            summary(&d),
            summary(&g),
            summary(&p)
        );
        let works_directly = mode != Mode::Pin;
        assert_eq!(d["ok"], works_directly, "{cell}");
        assert_eq!(g["ok"], true, "{cell}");
        let bridged = if mode == Mode::Legacy {
            "2025-11-25"
        } else {
            "2026-07-28"
        };
        assert_eq!(g["protocolVersion"], bridged, "{cell}");
        assert_eq!(d["ok"], p["ok"], "{cell}");
        if d["ok"] == true {
            assert_eq!(d["protocolVersion"], p["protocolVersion"], "{cell}");
        }
    }
    for g in [&gw, &plain] {
        assert_eq!(
            g.metric("mcpgate_server_era{server=\"up\",era=\"2025\"}")
                .await,
            1.0
        );
    }
}
