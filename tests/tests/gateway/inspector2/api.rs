//! The Inspector 2.x backend's routes and guards: the real 2.12 UI served with its token,
//! the same-origin API behind Host, Origin and token checks, and the side routes.

use mcpgate_tests::inspector::{TOKEN, testkit_toml};
use mcpgate_tests::inspector2::{Inspector2, ui_dir};
use reqwest::Method;
use serde_json::json;

#[tokio::test]
async fn the_ui_is_served_with_its_token_and_only_to_loopback_names() {
    let insp = Inspector2::start(&testkit_toml(""), &[]);
    let index = insp
        .http
        .get(format!("{}/", insp.base))
        .send()
        .await
        .unwrap();
    assert_eq!(index.status(), 200);
    assert!(
        index.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
    let html = index.text().await.unwrap();
    let script = format!("<script>window.__INSPECTOR_API_TOKEN__ = \"{TOKEN}\";</script></head>");
    assert!(html.contains(&script), "{html}");
    // The app's own routes get the page too; its assets are served as they are.
    let route = insp
        .http
        .get(format!("{}/servers/x", insp.base))
        .send()
        .await
        .unwrap();
    assert!(route.text().await.unwrap().contains(&script));
    let asset = std::fs::read_dir(ui_dir().join("assets"))
        .unwrap()
        .flatten()
        .find(|e| e.file_name().to_string_lossy().ends_with(".js"))
        .unwrap();
    let name = asset.file_name().to_string_lossy().into_owned();
    let r = insp
        .http
        .get(format!("{}/assets/{name}", insp.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(
        r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/javascript")
    );
    assert_eq!(
        r.bytes().await.unwrap(),
        std::fs::read(asset.path()).unwrap()
    );
    // The front's own probe answers without a token.
    let health = insp
        .http
        .get(format!("{}/healthz", insp.base))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    let missing = insp
        .http
        .get(format!("{}/assets/nope.js", insp.base))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
    // A DNS-rebinding page names its own host: neither the page (it holds the token) nor
    // the API answers it.
    for path in ["/", "/api/config"] {
        let r = insp
            .request(Method::GET, path, &[("host", "evil.example:6274")])
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 403, "{path}");
        assert!(!r.text().await.unwrap().contains(TOKEN));
    }
}

#[tokio::test]
async fn the_api_needs_the_token_and_its_own_origin() {
    let insp = Inspector2::start(&testkit_toml(""), &[]);
    let status = |h: Vec<(&'static str, String)>| {
        let insp = &insp;
        async move {
            let hs: Vec<(&str, &str)> = h.iter().map(|(k, v)| (*k, v.as_str())).collect();
            let r = insp
                .request(Method::GET, "/api/config", &hs)
                .send()
                .await
                .unwrap();
            let s = r.status().as_u16();
            let body: serde_json::Value = r.json().await.unwrap();
            (s, body)
        }
    };
    let (s, body) = status(vec![]).await;
    assert_eq!(s, 200, "{body}");
    assert_eq!(body["writable"], false);
    assert_eq!(body["defaultEnvironment"], json!({}));
    // No token, a wrong one, another scheme: 401.
    for bad in [
        "",
        "Bearer wrong-token-0123456789",
        &format!("Basic {TOKEN}"),
    ] {
        let (s, body) = status(vec![("x-mcp-remote-auth", bad.to_owned())]).await;
        assert_eq!(s, 401, "{bad}: {body}");
        assert!(
            body["error"]
                .as_str()
                .unwrap()
                .contains("x-mcp-remote-auth")
        );
    }
    // Another page's origin: 403, even with the token.
    let (s, _) = status(vec![("origin", "http://evil.example".to_owned())]).await;
    assert_eq!(s, 403);
    let (s, _) = status(vec![("origin", "http://localhost:1".to_owned())]).await;
    assert_eq!(s, 403);
    // No Origin (not a browser) with the token: served.
    let (s, _) = status(vec![("origin", String::new())]).await;
    assert_eq!(s, 200);
    // The preflight of the UI's own origin.
    let r = insp
        .request(
            Method::OPTIONS,
            "/api/mcp/send",
            &[("x-mcp-remote-auth", "")],
        )
        .header("access-control-request-method", "POST")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    assert_eq!(
        r.headers()["access-control-allow-origin"],
        insp.base.as_str()
    );
    assert_eq!(insp.metric("mcpgate_sessions_active").await, 0.0);
}

#[tokio::test]
async fn the_catalogue_is_the_allowlist_and_read_only() {
    let toml = testkit_toml(
        "[[url]]\nname = \"remote\"\nprefix = \"http://127.0.0.1:3001/mcp\"\ntransports = [\"streamable-http\"]\n\
         [[stdio]]\nname = \"wild\"\ncommand = \"/bin/echo\"\nargs = [\"*\"]\n",
    );
    let insp = Inspector2::start(&toml, &[]);
    let (s, v) = insp.api(Method::GET, "/api/servers", None).await;
    assert_eq!(s, 200);
    let servers = v["mcpServers"].as_object().unwrap();
    assert_eq!(servers["testkit"]["type"], "stdio");
    assert_eq!(servers["testkit"]["args"], json!(["stdio"]));
    assert_eq!(
        servers["remote"],
        json!({"type":"streamable-http","url":"http://127.0.0.1:3001/mcp"})
    );
    // A rule with a wildcard cannot be listed as one server.
    assert!(!servers.contains_key("wild"), "{v}");
    for (m, path) in [
        (Method::POST, "/api/servers"),
        (Method::PUT, "/api/servers/testkit"),
        (Method::DELETE, "/api/servers/testkit"),
        (Method::PUT, "/api/servers/order"),
    ] {
        let (s, v) = insp
            .api(
                m.clone(),
                path,
                Some(json!({"id":"x","config":{"command":"sh"}})),
            )
            .await;
        assert_eq!(s, 403, "{m} {path}: {v}");
        assert!(v["error"].as_str().unwrap().contains("read-only"));
    }
    let (s, _) = insp
        .api(Method::GET, "/api/import-source?type=claude", None)
        .await;
    assert_eq!(s, 403);
    let (s, _) = insp.api(Method::GET, "/api/nothing", None).await;
    assert_eq!(s, 404);
    let (s, v) = insp
        .api(
            Method::POST,
            "/api/mcp/auth-state",
            Some(json!({"sessionId":"x","authState":{}})),
        )
        .await;
    assert_eq!(s, 400, "{v}");
}

#[tokio::test]
async fn storage_and_log_routes() {
    let insp = Inspector2::start(&testkit_toml(""), &[]);
    let (s, v) = insp.api(Method::GET, "/api/storage/client", None).await;
    assert_eq!((s, v), (200, json!({})));
    let doc = json!({"theme":"dark","servers":{"a":1}});
    let (s, v) = insp
        .api(Method::POST, "/api/storage/client", Some(doc.clone()))
        .await;
    assert_eq!((s, v), (200, json!({"ok": true})));
    assert_eq!(
        insp.api(Method::GET, "/api/storage/client", None).await,
        (200, doc)
    );
    let (s, _) = insp
        .api(Method::POST, "/api/storage/..%2Fetc", Some(json!({})))
        .await;
    assert_eq!(s, 400);
    let (s, _) = insp
        .api(Method::POST, "/api/storage/client", Some(json!([1])))
        .await;
    assert_eq!(s, 400);
    let (s, _) = insp.api(Method::DELETE, "/api/storage/client", None).await;
    assert_eq!(s, 200);
    assert_eq!(
        insp.api(Method::GET, "/api/storage/client", None).await,
        (200, json!({}))
    );
    let line = "ui-log-line-0b7e";
    let (s, _) = insp
        .api(
            Method::POST,
            "/api/log",
            Some(json!({"level":{"label":"warn"},"messages":[line]})),
        )
        .await;
    assert_eq!(s, 200);
    mcpgate_tests::wait_until(std::time::Duration::from_secs(5), || async {
        insp.gw.log().contains(line)
    })
    .await;
    assert!(insp.gw.log().contains(line));
}
