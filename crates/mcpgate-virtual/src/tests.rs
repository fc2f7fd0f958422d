#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use mcpgate_jsonrpc::{Id, Message};
use serde_json::json;

use crate::access::{Access, View, Who};
use crate::catalogue::{self, List};
use crate::names::{Cursor, tag_id, untag_id};
use crate::plan::{Effect, Failure, Filter, Item, MemberPlan, Naming, Patterns, Plan, Rule};

fn pats(p: &[&str]) -> Option<Patterns> {
    Some(Patterns::new("t", p.iter().map(|s| (*s).to_owned()).collect()).unwrap())
}

fn member(server: &str, prefix: &str) -> MemberPlan {
    MemberPlan {
        server: server.into(),
        prefix: prefix.into(),
        tools: Filter::default(),
        prompts: Filter::default(),
        resources: Filter::default(),
    }
}

fn plan() -> Plan {
    let mut fs = member("filesystem", "fs");
    fs.tools.deny = pats(&["write_*"]);
    Plan {
        name: "all".into(),
        separator: "__".into(),
        naming: Naming::Always,
        failure: Failure::Closed,
        members: vec![member("everything", "ev"), fs],
        rules: vec![Rule {
            effect: Effect::Deny,
            principals: pats(&["token:bob"]),
            groups: vec![],
            tools: pats(&["ev__get*"]),
            prompts: None,
            resources: None,
        }],
        default_allow: true,
    }
}

#[test]
fn names_uris_and_ids_go_back_as_they_came() {
    let p = plan();
    assert!(p.check().is_ok());
    assert_eq!(p.expose(1, "read_file"), "fs__read_file");
    assert_eq!(p.route_uri("zz+file:///x"), None);
    assert_eq!(p.route_uri("file:///x"), None);
    let u = p.expose_uri(0, "demo://resource/static/1");
    assert_eq!(u, "ev+demo://resource/static/1");
    assert_eq!(
        p.route_uri(&u),
        Some((0, "demo://resource/static/1".into()))
    );
    let app = p.expose_uri(1, "ui://get-time/mcp-app.html");
    assert_eq!(app, "ui://fs+get-time/mcp-app.html");
    assert_eq!(
        p.route_uri(&app),
        Some((1, "ui://get-time/mcp-app.html".into()))
    );
    assert_eq!(p.route_uri("ui://zz+get-time/x"), None);
    assert_eq!(p.route_uri("ui://get-time/x"), None);
    for raw in ["7", "\"a\\\"b\"", "-3"] {
        let id = Id::from_raw(raw).unwrap();
        let t = tag_id(2, &id);
        assert_eq!(untag_id(&t), Some((2, id)));
    }
    assert_eq!(untag_id(&Id::from_raw("\"x\"").unwrap()), None);
}

#[test]
fn cursors_refuse_what_the_gateway_did_not_make() {
    let c = Cursor(vec![(0, Some("abc".into())), (1, None)]);
    assert_eq!(Cursor::decode(&c.encode(), 2).unwrap(), c);
    assert!(Cursor::decode(&c.encode(), 1).is_err());
    assert!(Cursor::decode("v1.!!", 2).is_err());
    assert!(Cursor::decode("abc", 2).is_err());
    let repeated = Cursor(vec![(0, None), (0, Some("x".into()))]);
    assert!(Cursor::decode(&repeated.encode(), 2).is_err());
}

#[test]
fn plans_with_ambiguous_prefixes_are_refused() {
    let mut p = plan();
    p.members[1].prefix = "ev".into();
    assert!(p.check().is_err());
    let mut p = plan();
    p.members[1].prefix = "f__s".into();
    assert!(p.check().is_err());
    let mut p = plan();
    p.members[1].prefix = "f_s".into();
    assert!(p.check().is_err());
}

#[test]
fn filters_hide_and_rules_forbid() {
    let p = Arc::new(plan());
    let bob = View::new(
        p.clone(),
        &Who {
            principal: Some("token:bob".into()),
            ..Who::default()
        },
    );
    let alice = View::new(
        p,
        &Who {
            principal: Some("token:alice".into()),
            ..Who::default()
        },
    );
    assert_eq!(
        bob.check(Item::Tool, 1, "write_file", "fs__write_file"),
        Access::Hidden
    );
    assert_eq!(
        bob.check(Item::Tool, 0, "getTinyImage", "ev__getTinyImage"),
        Access::Forbidden
    );
    assert_eq!(
        alice.check(Item::Tool, 0, "getTinyImage", "ev__getTinyImage"),
        Access::Visible
    );
    let answers = vec![
        (
            0,
            json!({"tools": [{"name": "echo"}, {"name": "getTinyImage"}], "nextCursor": "2"}),
        ),
        (
            1,
            json!({"tools": [{"name": "read_file"}, {"name": "write_file"}]}),
        ),
    ];
    let page = catalogue::page(&bob, List::Tools, &answers, None);
    let names: Vec<&str> = page
        .entries
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["ev__echo", "fs__read_file"]);
    assert_eq!(page.more, vec![(0, Some("2".into()))]);
    let counts = catalogue::name_counts(alice.plan(), List::Tools, &answers);
    let page = catalogue::page(&alice, List::Tools, &answers, Some(&counts));
    let names: Vec<&str> = page
        .entries
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["echo", "getTinyImage", "read_file"]);
    // A name two members show is prefixed on both; one a filter hides collides with nothing.
    let clash = vec![
        (0, json!({"tools": [{"name": "echo"}, {"name": "write_x"}]})),
        (1, json!({"tools": [{"name": "echo"}, {"name": "write_x"}]})),
    ];
    let counts = catalogue::name_counts(alice.plan(), List::Tools, &clash);
    let page = catalogue::page(&alice, List::Tools, &clash, Some(&counts));
    let names: Vec<&str> = page
        .entries
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["ev__echo", "write_x", "fs__echo"]);
    // A bare name that reads as another member's prefixed name is prefixed: `fs__x` of ev
    // and `x` of fs would otherwise both be `fs__x`.
    let lookalike = vec![
        (0, json!({"tools": [{"name": "fs__x"}]})),
        (1, json!({"tools": [{"name": "x"}, {"name": "y"}]})),
    ];
    let counts = catalogue::name_counts(alice.plan(), List::Tools, &lookalike);
    let page = catalogue::page(&alice, List::Tools, &lookalike, Some(&counts));
    let names: Vec<&str> = page
        .entries
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["ev__fs__x", "x", "y"]);
}

#[test]
fn rules_match_the_prefixed_form_of_bare_names() {
    let mut p = plan();
    p.naming = Naming::OnCollision;
    let bob = View::new(
        Arc::new(p),
        &Who {
            principal: Some("token:bob".into()),
            ..Who::default()
        },
    );
    // `getTinyImage` is unique, so it is listed bare; the rule on `ev__get*` still holds.
    assert_eq!(
        bob.check(Item::Tool, 0, "getTinyImage", "getTinyImage"),
        Access::Forbidden
    );
}

#[test]
fn initialize_merges_capabilities_and_instructions() {
    let p = plan();
    let merged = catalogue::initialize(
        &p,
        &[
            (
                0,
                json!({"protocolVersion": "2025-11-25", "capabilities": {"tools": {}, "logging": {}}, "instructions": "everything"}),
            ),
            (
                1,
                json!({"protocolVersion": "2025-06-18", "capabilities": {"resources": {"subscribe": true}}}),
            ),
        ],
    );
    assert_eq!(merged["protocolVersion"], "2025-06-18");
    assert_eq!(merged["capabilities"]["tools"]["listChanged"], true);
    assert_eq!(merged["capabilities"]["resources"]["subscribe"], true);
    assert!(merged["capabilities"]["logging"].is_object());
    assert_eq!(merged["instructions"], "[ev] everything");
    assert_eq!(merged["serverInfo"]["name"], "all");
}

#[test]
fn params_are_edited_one_field_at_a_time() {
    let m = Message::parse(bytes::Bytes::from_static(
        br#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"fs__read","arguments":{"path":"/x"},"_meta":{"progressToken":9}}}"#,
    ))
    .unwrap();
    assert_eq!(
        crate::rewrite::param_str(&m, "name").as_deref(),
        Some("fs__read")
    );
    let out = crate::rewrite::with_param(&m, "name", &json!("read")).unwrap();
    let v: serde_json::Value = serde_json::from_slice(out.raw()).unwrap();
    assert_eq!(v["params"]["name"], "read");
    assert_eq!(v["params"]["arguments"]["path"], "/x");
    assert_eq!(v["params"]["_meta"]["progressToken"], 9);
    assert_eq!(v["id"], 3);
    let p = plan();
    let req = Message::parse(bytes::Bytes::from_static(
        br#"{"jsonrpc":"2.0","id":0,"method":"sampling/createMessage","params":{}}"#,
    ))
    .unwrap();
    let tagged = crate::rewrite::from_member(&p, 1, req);
    let answer = Message::parse(bytes::Bytes::from(format!(
        r#"{{"jsonrpc":"2.0","id":{},"result":{{}}}}"#,
        tagged.id().unwrap().as_raw()
    )))
    .unwrap();
    let (member, back) = crate::rewrite::to_member(&answer).unwrap();
    assert_eq!(member, 1);
    assert_eq!(back.id().unwrap().as_raw(), "0");
}

#[test]
fn an_app_and_what_a_result_names_are_exposed_in_step() {
    let p = plan();
    let mut tool = serde_json::json!({"name": "t", "_meta": {
        "ui": {"resourceUri": "ui://t/app.html"}, "ui/resourceUri": "ui://t/app.html"}});
    crate::apps::expose_meta(&p, 1, &mut tool);
    assert_eq!(tool["_meta"]["ui"]["resourceUri"], "ui://fs+t/app.html");
    assert_eq!(tool["_meta"]["ui/resourceUri"], "ui://fs+t/app.html");
    let raw = r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"uri\""},
        {"type":"resource_link","uri":"file:///a","name":"a"},
        {"type":"resource","resource":{"uri":"ui://t/app.html","text":"x"}}]}}"#;
    let msg = Message::parse(bytes::Bytes::from(raw)).unwrap();
    let out = crate::apps::call_result(&p, 1, msg);
    let v: serde_json::Value = serde_json::from_slice(out.raw()).unwrap();
    assert_eq!(v["result"]["content"][0]["text"], "uri\"");
    assert_eq!(v["result"]["content"][1]["uri"], "fs+file:///a");
    assert_eq!(
        v["result"]["content"][2]["resource"]["uri"],
        "ui://fs+t/app.html"
    );
    let plain = Message::parse(bytes::Bytes::from_static(
        br#"{"jsonrpc":"2.0","id":1,"result":{"content":[]}}"#,
    ))
    .unwrap();
    assert_eq!(
        crate::apps::call_result(&p, 1, plain.clone()).raw(),
        plain.raw()
    );
}
