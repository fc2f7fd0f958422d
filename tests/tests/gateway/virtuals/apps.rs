//! MCP Apps through a virtual server, with the official example app servers (stdio) and
//! the official host helper: each tool's app URI is a `ui://` URI the client can read,
//! the app's own calls by its server's bare tool names reach that server once its app
//! was read, and results name exposed URIs.

use mcpgate_tests::Gateway;
use mcpgate_tests::virtuals::{app_server, run_apps_client};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apps_open_and_call_home_through_a_virtual_server() {
    let gw = Gateway::start(&format!(
        "{}{}[[virtual]]\nname = \"apps\"\n[[virtual.member]]\nserver = \"app\"\n[[virtual.member]]\nserver = \"map\"\n",
        app_server("app", "server-basic-vanillajs"),
        app_server("map", "server-map"),
    ));
    let url = gw.url().replace("/mcp", "/servers/apps/mcp");
    let v = run_apps_client(&url).await;

    // The host helper accepted each tool's app URI: ui://, prefixed, in step with the
    // resource the member serves.
    assert_eq!(
        v["apps"]["app__get-time"], "ui://app+get-time/mcp-app.html",
        "{v}"
    );
    assert_eq!(
        v["apps"]["map__show-map"], "ui://map+cesium-map/mcp-app.html",
        "{v}"
    );
    for uri in [
        "ui://app+get-time/mcp-app.html",
        "ui://map+cesium-map/mcp-app.html",
    ] {
        let read = &v["reads"][uri];
        assert_eq!(read["mimeType"], "text/html;profile=mcp-app", "{uri}: {v}");
        assert_eq!(read["uri"], uri, "the read names what was asked: {v}");
        assert_eq!(read["html"], true, "{uri}: {v}");
    }
    // Before any app was read, a bare name is just unknown; after, it is the app's call.
    let before = v["bareBefore"]["error"].as_str().unwrap_or_default();
    assert!(before.contains("Unknown tool: get-time"), "{v}");
    for call in ["bareAfter", "exposed"] {
        let r = &v[call];
        assert_eq!(r["isError"], false, "{call}: {v}");
        assert!(r["structured"]["time"].is_string(), "{call}: {v}");
    }
    assert_eq!(v["map"]["isError"], false, "{v}");
}
