//! The workspace's layout rules as data: the `.rs` files that are too long, and each
//! crate's module dependency graph with its cycles (`tests/tests/layout.rs` asserts on
//! them).
//!
//! A module is a file: the crate root (`src/lib.rs`, `src/main.rs`) is `crate`,
//! `src/x.rs` or `src/x/mod.rs` is `x`, `src/x/y.rs` is `x::y`; files are found by
//! following `mod x;` declarations from the root. A module depends on the modules its
//! `crate::…` paths name (in `use` trees, `use crate::{a::X, b::{Y, Z}};` included, and
//! anywhere else): for `crate::a::b::Item`, the deepest prefix that is a module; a path
//! `crate::Item` whose first segment is not a module names the root. The root declares
//! every module, so a module that depends on the root forms a cycle with it
//! (`x -> crate -> x`). The parser is token-based and best-effort: comments, string and
//! char literals are blanked out first; `$crate::` (macros) and `pub(crate)` are no paths.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// How the crate root is named in module paths and cycles.
pub const ROOT: &str = "crate";

/// The repository root (the parent of the `tests` crate).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// The `.rs` files under `root/crates` and `root/tests` (not under `target`,
/// `node_modules` or `fuzz` folders) with more than `limit` lines, with their line
/// counts, sorted by path.
pub fn oversized(root: &Path, limit: usize) -> Vec<(PathBuf, usize)> {
    let mut out = Vec::new();
    for top in ["crates", "tests"] {
        walk(&root.join(top), &mut |p| {
            if p.extension().is_some_and(|e| e == "rs") {
                let lines = std::fs::read_to_string(p).map_or(0, |s| s.lines().count());
                if lines > limit {
                    let rel = p.strip_prefix(root).unwrap_or(p).to_path_buf();
                    out.push((rel, lines));
                }
            }
        });
    }
    out.sort();
    out
}

fn walk(dir: &Path, f: &mut dyn FnMut(&Path)) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        let name = e.file_name();
        let skip = matches!(name.to_str(), Some("target" | "node_modules" | "fuzz"));
        match e.file_type() {
            Ok(t) if t.is_dir() && !skip => walk(&p, f),
            Ok(t) if t.is_file() => f(&p),
            _ => {}
        }
    }
}

/// One crate's module files: module path (`crate`, `a`, `a::b`) → source text.
#[derive(Debug, Clone)]
pub struct CrateSource {
    /// The crate's name in reports (the package name; `name (bin)` for the binary of a
    /// package that also has a library).
    pub name: String,
    /// Its modules and their sources.
    pub modules: BTreeMap<String, String>,
}

impl CrateSource {
    /// Collects the modules reachable from `root` (a file name relative to some folder,
    /// e.g. `lib.rs`) through `mod x;` declarations, reading files with `read` (a path
    /// relative to that folder, `/`-separated; `None` when there is no such file).
    pub fn collect(name: &str, root: &str, read: &dyn Fn(&str) -> Option<String>) -> CrateSource {
        let mut modules = BTreeMap::new();
        let mut todo = vec![(ROOT.to_owned(), root.to_owned())];
        while let Some((module, file)) = todo.pop() {
            let Some(text) = read(&file) else { continue };
            // Children of the root or of a mod.rs live next to it; children of `x.rs` in `x/`.
            let dir = match file.rsplit_once('/') {
                Some((d, f)) if module == ROOT || f == "mod.rs" => format!("{d}/"),
                None if module == ROOT || file == "mod.rs" => String::new(),
                _ => format!("{}/", file.trim_end_matches(".rs")),
            };
            for child in mod_decls(&text) {
                let path = if module == ROOT {
                    child.clone()
                } else {
                    format!("{module}::{child}")
                };
                let flat = format!("{dir}{child}.rs");
                let nested = format!("{dir}{child}/mod.rs");
                let file = if read(&flat).is_some() { flat } else { nested };
                todo.push((path, file));
            }
            modules.insert(module, text);
        }
        CrateSource {
            name: name.to_owned(),
            modules,
        }
    }

    /// [`CrateSource::collect`] over files on disk, relative to `root_file`'s folder.
    pub fn load(name: &str, root_file: &Path) -> CrateSource {
        let dir = root_file.parent().unwrap_or(Path::new(".")).to_path_buf();
        let root = root_file
            .file_name()
            .and_then(|f| f.to_str())
            .unwrap_or("lib.rs")
            .to_owned();
        CrateSource::collect(name, &root, &|rel| {
            std::fs::read_to_string(dir.join(rel)).ok()
        })
    }

    /// [`CrateSource::collect`] over in-memory files (`("lib.rs", "mod a;"), ("a.rs", …)`).
    pub fn from_files(name: &str, files: &[(&str, &str)]) -> CrateSource {
        let map: BTreeMap<&str, &str> = files.iter().copied().collect();
        let root = ["lib.rs", "main.rs"]
            .into_iter()
            .find(|r| map.contains_key(r))
            .unwrap_or("lib.rs");
        CrateSource::collect(name, root, &|rel| map.get(rel).map(|s| (*s).to_owned()))
    }
}

/// Every library and binary crate under `root/crates/*` (`src/lib.rs`, `src/main.rs`).
pub fn workspace_crates(root: &Path) -> Vec<CrateSource> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(root.join("crates")) else {
        return out;
    };
    let mut dirs: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    dirs.sort();
    for dir in dirs {
        let Ok(manifest) = std::fs::read_to_string(dir.join("Cargo.toml")) else {
            continue;
        };
        let name = manifest
            .lines()
            .find_map(|l| {
                let v = l
                    .trim()
                    .strip_prefix("name")?
                    .trim_start()
                    .strip_prefix('=')?;
                Some(v.trim().trim_matches('"').to_owned())
            })
            .unwrap_or_else(|| dir.file_name().unwrap().to_string_lossy().into_owned());
        let (lib, bin) = (dir.join("src/lib.rs"), dir.join("src/main.rs"));
        if lib.exists() {
            out.push(CrateSource::load(&name, &lib));
        }
        if bin.exists() {
            let label = if lib.exists() {
                format!("{name} (bin)")
            } else {
                name.clone()
            };
            out.push(CrateSource::load(&label, &bin));
        }
    }
    out
}

/// `src` with comments and string and char literals replaced by spaces (newlines kept).
pub fn strip_comments_and_strings(src: &str) -> String {
    let c: Vec<char> = src.chars().collect();
    let at = |i: usize| c.get(i).copied().unwrap_or('\0');
    let ident = |i: Option<usize>| i.is_some_and(|i| at(i).is_alphanumeric() || at(i) == '_');
    let mut out = String::with_capacity(src.len());
    let blank = |out: &mut String, ch: char| out.push(if ch == '\n' { '\n' } else { ' ' });
    let mut i = 0;
    while i < c.len() {
        let prev = i.checked_sub(1);
        if at(i) == '/' && at(i + 1) == '/' {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if at(i) == '/' && at(i + 1) == '*' {
            let mut depth = 0;
            while i < c.len() {
                if at(i) == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if at(i) == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, c[i]);
                    i += 1;
                }
            }
        } else if at(i) == 'r'
            && matches!(at(i + 1), '"' | '#')
            && (!ident(prev) || (at(i - 1) == 'b' && !ident(prev.and_then(|p| p.checked_sub(1)))))
        {
            // A raw string r"…", r#"…"# (or br"…"): up to the quote and as many hashes.
            let mut hashes = 0;
            while at(i + 1 + hashes) == '#' {
                hashes += 1;
            }
            if at(i + 1 + hashes) != '"' {
                out.push(c[i]);
                i += 1;
                continue;
            }
            i += 2 + hashes;
            while i < c.len() && !(at(i) == '"' && (1..=hashes).all(|k| at(i + k) == '#')) {
                blank(&mut out, c[i]);
                i += 1;
            }
            i += 1 + hashes;
        } else if at(i) == '"' {
            i += 1;
            while i < c.len() && at(i) != '"' {
                if at(i) == '\\' {
                    blank(&mut out, c[i]);
                    i += 1;
                }
                if i < c.len() {
                    blank(&mut out, c[i]);
                }
                i += 1;
            }
            i += 1;
        } else if at(i) == '\'' && at(i + 1) == '\\' {
            // An escaped char literal ('\n', '\'', '\u{1F600}'): to the closing quote.
            i += 3;
            while i < c.len() && at(i) != '\'' {
                i += 1;
            }
            i += 1;
        } else if at(i) == '\'' && at(i + 2) == '\'' {
            // A char literal ('x', '"'); a lifetime ('a) has no closing quote.
            i += 3;
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

/// Tokens: identifiers (and numbers), `::`, single punctuation characters.
fn tokens(clean: &str) -> Vec<String> {
    let c: Vec<char> = clean.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < c.len() {
        if c[i].is_whitespace() {
            i += 1;
        } else if c[i].is_alphanumeric() || c[i] == '_' {
            let start = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            out.push(c[start..i].iter().collect());
        } else if c[i] == ':' && c.get(i + 1) == Some(&':') {
            out.push("::".to_owned());
            i += 2;
        } else {
            out.push(c[i].to_string());
            i += 1;
        }
    }
    out
}

/// The file modules a source declares (`mod x;`, any visibility and attributes).
pub fn mod_decls(src: &str) -> Vec<String> {
    let t = tokens(&strip_comments_and_strings(src));
    let mut out = Vec::new();
    for i in 0..t.len() {
        if t[i] == "mod" && t.get(i + 2).is_some_and(|s| s == ";") {
            out.push(t[i + 1].clone());
        }
    }
    out
}

/// Every `crate::…` path in a source, as its segments after `crate` (`use` trees are
/// expanded: `use crate::{a::X, b::{Y, Z}};` gives `a::X`, `b::Y`, `b::Z`).
pub fn crate_paths(src: &str) -> Vec<Vec<String>> {
    let t = tokens(&strip_comments_and_strings(src));
    let mut out = Vec::new();
    let mut i = 0;
    while i < t.len() {
        if t[i] == "use" {
            let mut paths = Vec::new();
            i = use_tree(&t, i + 1, Vec::new(), &mut paths);
            out.extend(
                paths
                    .into_iter()
                    .filter(|p| p.first().is_some_and(|s| s == "crate"))
                    .map(|p| p[1..].to_vec()),
            );
            continue;
        }
        let prev = i.checked_sub(1).map(|k| t[k].as_str());
        if t[i] == "crate"
            && t.get(i + 1).is_some_and(|s| s == "::")
            && !matches!(prev, Some("$" | "in"))
        {
            let mut path = Vec::new();
            let mut k = i + 1;
            while t.get(k).is_some_and(|s| s == "::") && t.get(k + 1).is_some_and(|s| is_ident(s)) {
                path.push(t[k + 1].clone());
                k += 2;
            }
            if !path.is_empty() {
                out.push(path);
            }
            i = k;
            continue;
        }
        i += 1;
    }
    out
}

fn is_ident(s: &str) -> bool {
    s.chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
}

/// Parses one use tree starting at `t[i]` with `prefix` before it; pushes its full paths
/// and returns the index after it (after the `;` at the top level).
fn use_tree(
    t: &[String],
    mut i: usize,
    mut prefix: Vec<String>,
    out: &mut Vec<Vec<String>>,
) -> usize {
    let top = prefix.is_empty();
    loop {
        match t.get(i).map(String::as_str) {
            Some("::") => i += 1,
            Some("{") => {
                i += 1;
                loop {
                    i = use_tree(t, i, prefix.clone(), out);
                    match t.get(i).map(String::as_str) {
                        Some(",") => i += 1,
                        Some("}") => {
                            i += 1;
                            break;
                        }
                        _ => break,
                    }
                    if t.get(i).is_some_and(|s| s == "}") {
                        i += 1;
                        break;
                    }
                }
                break;
            }
            Some("*") => {
                i += 1;
                out.push(prefix.clone());
                break;
            }
            Some("self") if !prefix.is_empty() => {
                i += 1;
                out.push(prefix.clone());
                break;
            }
            Some(s) if is_ident(s) => {
                prefix.push(s.to_owned());
                i += 1;
                if t.get(i).is_some_and(|s| s == "as") {
                    i += 2;
                }
                if t.get(i).is_none_or(|s| s != "::") {
                    out.push(prefix.clone());
                    break;
                }
            }
            _ => break,
        }
    }
    if top && t.get(i).is_some_and(|s| s == ";") {
        i += 1;
    }
    i
}

/// A crate's module dependency graph.
#[derive(Debug, Clone)]
pub struct Graph {
    /// The crate's name.
    pub name: String,
    /// Module → the modules it depends on (never itself).
    pub edges: BTreeMap<String, BTreeSet<String>>,
}

impl Graph {
    /// The graph of `krate`'s `crate::…` paths.
    pub fn build(krate: &CrateSource) -> Graph {
        let modules: BTreeSet<&str> = krate.modules.keys().map(String::as_str).collect();
        let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (module, text) in &krate.modules {
            let deps = edges.entry(module.clone()).or_default();
            for path in crate_paths(text) {
                let target = (1..=path.len())
                    .rev()
                    .map(|k| path[..k].join("::"))
                    .find(|p| p != ROOT && modules.contains(p.as_str()))
                    .unwrap_or_else(|| ROOT.to_owned());
                if target != *module {
                    deps.insert(target);
                }
            }
        }
        Graph {
            name: krate.name.clone(),
            edges,
        }
    }

    /// Every elementary cycle, each as its modules with the first repeated at the end,
    /// starting at its smallest module: `x -> crate -> x` for each module that depends on
    /// the root (which declares it), then the cycles among the other modules.
    pub fn cycles(&self) -> Vec<Vec<String>> {
        let mut out: Vec<Vec<String>> = self
            .edges
            .iter()
            .filter(|(m, deps)| *m != ROOT && deps.contains(ROOT))
            .map(|(m, _)| vec![m.clone(), ROOT.to_owned(), m.clone()])
            .collect();
        let nodes: Vec<&String> = self.edges.keys().filter(|m| *m != ROOT).collect();
        for start in &nodes {
            let mut path = vec![(*start).clone()];
            self.cycles_from(start, start, &mut path, &mut out);
        }
        out
    }

    /// Extends `path` (from `start`) through modules after `start`, recording the cycles
    /// back to `start`; at most 10 000 cycles in all.
    fn cycles_from(
        &self,
        start: &str,
        at: &str,
        path: &mut Vec<String>,
        out: &mut Vec<Vec<String>>,
    ) {
        for next in self.edges.get(at).into_iter().flatten() {
            if out.len() >= 10_000 {
                return;
            }
            if next == start {
                let mut cycle = path.clone();
                cycle.push(start.to_owned());
                out.push(cycle);
            } else if next.as_str() > start && next != ROOT && !path.contains(next) {
                path.push(next.clone());
                self.cycles_from(start, next, path, out);
                path.pop();
            }
        }
    }

    /// `name: a -> b -> a`, one line per cycle.
    pub fn report(&self) -> Vec<String> {
        self.cycles()
            .iter()
            .map(|c| format!("{}: {}", self.name, c.join(" -> ")))
            .collect()
    }
}
