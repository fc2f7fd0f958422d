//! The workspace's layout: no `.rs` file under `crates/` or `tests/` is longer than 600
//! lines, no crate's modules depend on each other in a cycle, no production function is
//! longer than 80 lines, no production error is a `String`, the transports know nothing
//! of the layers above them, and no name says `bridged`; plus the parsers
//! (`mcpgate_tests::layout`, `mcpgate_tests::rules`) on small inline examples.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use mcpgate_tests::layout::{
    CrateSource, Graph, crate_paths, mod_decls, oversized, strip_comments_and_strings,
    workspace_crates, workspace_root,
};

const MAX_LINES: usize = 600;
const MAX_FUNCTION_LINES: usize = 80;

#[test]
fn no_rust_file_exceeds_600_lines() {
    let long = oversized(&workspace_root(), MAX_LINES);
    assert!(
        long.is_empty(),
        "{} .rs file(s) over {MAX_LINES} lines (split them by concept):\n{}",
        long.len(),
        long.iter()
            .map(|(p, n)| format!("  {} ({n} lines)", p.display()))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn no_module_cycles_in_the_workspace() {
    let crates = workspace_crates(&workspace_root());
    assert!(
        crates.iter().any(|c| c.name == "mcpgate-session"),
        "no crates found under crates/"
    );
    let cycles: Vec<String> = crates
        .iter()
        .flat_map(|c| Graph::build(c).report())
        .collect();
    assert!(
        cycles.is_empty(),
        "{} module cycle(s) (`crate` is the crate root, which declares every module):\n  {}",
        cycles.len(),
        cycles.join("\n  ")
    );
}

fn paths(src: &str) -> Vec<String> {
    crate_paths(src).iter().map(|p| p.join("::")).collect()
}

#[test]
fn use_groups_are_expanded() {
    assert_eq!(
        paths("use crate::{a::X, b::{Y, Z}};"),
        ["a::X", "b::Y", "b::Z"]
    );
    assert_eq!(
        paths("pub(crate) use crate::a::{self, B as C, d::*};\nuse std::io;"),
        ["a", "a::B", "a::d"]
    );
    assert_eq!(
        paths("use crate::{\n    a::X,\n    b::{\n        Y,\n    },\n};\nfn f() {}"),
        ["a::X", "b::Y"]
    );
    assert_eq!(
        paths("use super::x;\nuse self::y;\nuse ::z::w;"),
        Vec::<String>::new()
    );
}

#[test]
fn paths_outside_use_are_found() {
    assert_eq!(
        paths("fn f() -> crate::a::B<crate::c::D> { crate::e::f::<u8>(); crate::G }"),
        ["a::B", "c::D", "e::f", "G"]
    );
}

#[test]
fn comments_strings_macros_and_visibility_are_not_paths() {
    let src = r##"
        // use crate::commented;
        /* crate::block /* nested crate::inner */ still crate::comment */
        const S: &str = "crate::in_a_string \" crate::escaped";
        const R: &str = r#"crate::raw " crate::raw_too"#;
        const C: char = '"';
        const Q: char = '\'';
        fn f<'a>(x: &'a str) -> &'a str { x }
        macro_rules! m { () => { $crate::from_macro() } }
        pub(crate) fn g() {}
        pub(in crate::vis) fn h() {}
        use crate::real;
    "##;
    assert_eq!(paths(src), ["real"]);
    let clean = strip_comments_and_strings("a /* x\ny */ b // z\nc \"s\nt\" d");
    assert_eq!(clean.lines().count(), 4, "newlines are kept: {clean:?}");
    assert!(!clean.contains('x') && !clean.contains('z') && !clean.contains('s'));
}

#[test]
fn mod_declarations_are_found() {
    let src = "mod a;\npub mod b;\npub(crate) mod c;\n#[cfg(test)]\nmod tests;\nmod inline { }\n// mod commented;";
    assert_eq!(mod_decls(src), ["a", "b", "c", "tests"]);
}

#[test]
fn modules_are_files_found_through_mod_declarations() {
    let krate = CrateSource::from_files(
        "k",
        &[
            ("lib.rs", "mod a;\nmod b;"),
            ("a.rs", "mod x;"),
            ("a/x.rs", ""),
            ("b/mod.rs", "mod y;"),
            ("b/y.rs", ""),
            ("stray.rs", ""),
        ],
    );
    let names: Vec<&str> = krate.modules.keys().map(String::as_str).collect();
    assert_eq!(names, ["a", "a::x", "b", "b::y", "crate"]);
}

fn graph(files: &[(&str, &str)]) -> Graph {
    Graph::build(&CrateSource::from_files("k", files))
}

#[test]
fn an_edge_goes_to_the_deepest_module_named() {
    let g = graph(&[
        ("lib.rs", "mod a;\nmod c;"),
        ("a.rs", "mod b;"),
        ("a/b.rs", ""),
        (
            "c.rs",
            "use crate::a::b::Item;\nfn f() { crate::a::g(); crate::Top; crate::c::h(); }",
        ),
    ]);
    let deps: Vec<&str> = g.edges["c"].iter().map(String::as_str).collect();
    assert_eq!(deps, ["a", "a::b", "crate"], "no edge to itself");
}

#[test]
fn a_cycle_between_modules_is_reported() {
    let g = graph(&[
        ("lib.rs", "mod session;\nmod exchange;\nmod table;"),
        ("session.rs", "use crate::exchange::Exchange;"),
        (
            "exchange.rs",
            "use crate::session::Session;\nuse crate::table::Table;",
        ),
        ("table.rs", ""),
    ]);
    assert_eq!(g.report(), ["k: exchange -> session -> exchange"]);
}

#[test]
fn a_longer_cycle_is_reported_once() {
    let g = graph(&[
        ("lib.rs", "mod a;\nmod b;\nmod c;"),
        ("a.rs", "use crate::b::X;"),
        ("b.rs", "use crate::c::Y;"),
        ("c.rs", "use crate::a::Z;"),
    ]);
    assert_eq!(g.report(), ["k: a -> b -> c -> a"]);
}

#[test]
fn a_module_using_the_root_forms_a_cycle_with_it() {
    let g = graph(&[
        (
            "lib.rs",
            "mod a;\nmod b;\npub use a::A;\npub struct Shared;",
        ),
        ("a.rs", "use crate::Shared;"),
        ("b.rs", "use crate::a::A;"),
    ]);
    assert_eq!(g.report(), ["k: a -> crate -> a"]);
}

#[test]
fn an_acyclic_crate_has_no_cycles() {
    let g = graph(&[
        ("main.rs", "mod a;\nmod b;\nuse crate::a::A;\nfn main() {}"),
        ("a.rs", "use crate::b::B;"),
        ("b.rs", "pub struct B;"),
    ]);
    assert!(g.cycles().is_empty(), "{:?}", g.report());
}

#[test]
fn long_files_are_listed_except_under_target_node_modules_and_fuzz() {
    let root = std::env::temp_dir().join(format!("mcpgate-layout-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let long = "x\n".repeat(601);
    for (path, text) in [
        ("crates/a/src/long.rs", long.as_str()),
        ("crates/a/src/ok.rs", &"x\n".repeat(600)),
        ("crates/a/target/gen.rs", &long),
        ("tests/deep/more/long.rs", &long),
        ("tests/clients/node_modules/m/x.rs", &long),
        ("crates/fuzz/f.rs", &long),
        ("crates/a/notes.txt", &long),
        ("other/long.rs", &long),
    ] {
        let p = root.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    let found: Vec<(String, usize)> = oversized(&root, 600)
        .into_iter()
        .map(|(p, n)| (p.display().to_string(), n))
        .collect();
    let _ = std::fs::remove_dir_all(&root);
    assert_eq!(
        found,
        [
            ("crates/a/src/long.rs".to_owned(), 601),
            ("tests/deep/more/long.rs".to_owned(), 601)
        ]
    );
}

#[test]
fn no_production_function_exceeds_80_lines() {
    let long = mcpgate_tests::rules::long_functions(&workspace_root(), MAX_FUNCTION_LINES);
    assert!(
        long.is_empty(),
        "{} production function(s) over {MAX_FUNCTION_LINES} lines (split them by step):\n{}",
        long.len(),
        long.iter()
            .map(|f| format!(
                "  {}:{} {} ({} lines)",
                f.file.display(),
                f.line,
                f.name,
                f.lines
            ))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn no_production_error_is_a_string() {
    let found = mcpgate_tests::rules::string_errors(&workspace_root());
    assert!(
        found.is_empty(),
        "Result<_, String> in production code (an error kind with its source instead):\n{}",
        found
            .iter()
            .map(|(p, n)| format!("  {}:{n}", p.display()))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn the_transports_know_nothing_of_the_layers_above_them() {
    let root = workspace_root();
    let deps = mcpgate_tests::rules::internal_dependencies(&root, "mcpgate-upstream");
    assert!(!deps.is_empty(), "mcpgate-upstream's manifest not read");
    for above in [
        "mcpgate-bridge",
        "mcpgate-virtual",
        "mcpgate-compose",
        "mcpgate-session",
        "mcpgate-server",
    ] {
        assert!(
            !deps.iter().any(|d| d == above),
            "mcpgate-upstream (transports) depends on {above}: {deps:?}"
        );
    }
    let compose = mcpgate_tests::rules::internal_dependencies(&root, "mcpgate-compose");
    assert!(
        compose
            .iter()
            .all(|d| d != "mcpgate-session" && d != "mcpgate-server"),
        "mcpgate-compose depends on a layer above it: {compose:?}"
    );
}

#[test]
fn no_name_says_bridged() {
    let found = mcpgate_tests::rules::bridged_names(&workspace_root());
    assert!(
        found.is_empty(),
        "functions or types named *bridged*, or `bridged: bool` parameters:\n{}",
        found
            .iter()
            .map(|(p, n, l)| format!("  {}:{n}: {l}", p.display()))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn functions_are_measured_without_tests_comments_and_strings() {
    let src = "fn a() {\n    let s = \"{\";\n}\n// fn b() {\nfn c();\n#[cfg(test)]\nmod tests {\n    fn d() {\n    }\n}\nfn e() {\n\n\n}\n";
    let fns = mcpgate_tests::rules::functions(src);
    assert_eq!(
        fns,
        [(1, "a".to_owned(), 3), (11, "e".to_owned(), 4)],
        "c has no body, b is a comment, d is a test"
    );
}

#[test]
fn the_error_of_a_result_is_its_last_argument() {
    use mcpgate_tests::rules::result_error;
    assert_eq!(result_error("(), String> {"), Some("String"));
    assert_eq!(
        result_error("BTreeMap<String, String>, Refusal> {"),
        Some("Refusal")
    );
    assert_eq!(
        result_error("Vec<(u8, String)>, std::io::Error>"),
        Some("std::io::Error")
    );
    assert_eq!(result_error("T> = std::result::Result<T, E>;"), None);
}
