//! The workspace's code rules as data (`tests/tests/layout.rs` asserts on them): the
//! production functions that are too long, error results carried as strings, what each
//! crate depends on, and the names of the era bridge's types and functions outside its
//! own modules.
//!
//! Production code is every `.rs` file under `crates/*/src`, without the test kit, the
//! benchmark, test files (`tests.rs`, `tests/`) and the items behind `#[cfg(test)]`.

use std::path::{Path, PathBuf};

use crate::layout::strip_comments_and_strings;

/// A production function and its length in lines (from the `fn` line to its closing
/// brace).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Function {
    /// The file, relative to the workspace root.
    pub file: PathBuf,
    /// The line of its `fn`.
    pub line: usize,
    /// Its name.
    pub name: String,
    /// Its length.
    pub lines: usize,
}

/// The production `.rs` files under `root/crates`, sorted.
pub fn production_files(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(crates) = std::fs::read_dir(root.join("crates")) else {
        return out;
    };
    for c in crates.flatten() {
        let name = c.file_name().to_string_lossy().into_owned();
        if matches!(name.as_str(), "mcpgate-testkit" | "mcpgate-bench") {
            continue;
        }
        collect(&c.path().join("src"), &mut out);
    }
    out.sort();
    out.into_iter()
        .map(|p| p.strip_prefix(root).map(Path::to_path_buf).unwrap_or(p))
        .collect()
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        if p.is_dir() {
            if name != "tests" {
                collect(&p, out);
            }
        } else if name.ends_with(".rs") && name != "tests.rs" {
            out.push(p);
        }
    }
}

/// `src` without comments, literals and the items behind `#[cfg(test)]` (blanked, lines
/// kept).
pub fn production_code(src: &str) -> String {
    let clean = strip_comments_and_strings(src);
    let mut out = String::with_capacity(clean.len());
    let mut rest = clean.as_str();
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let item = &rest[at..];
        let end = item_end(item);
        out.extend(
            item[..end]
                .chars()
                .map(|c| if c == '\n' { '\n' } else { ' ' }),
        );
        rest = &item[end..];
    }
    out.push_str(rest);
    out
}

/// Where the item starting at the beginning of `s` ends: after its brace-matched body,
/// or its `;`.
fn item_end(s: &str) -> usize {
    let mut depth = 0usize;
    for (i, c) in s.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return i + 1;
                }
            }
            ';' if depth == 0 => return i + 1,
            _ => {}
        }
    }
    s.len()
}

/// The functions of `src` (production code only) with their lengths.
pub fn functions(src: &str) -> Vec<(usize, String, usize)> {
    let code = production_code(src);
    let b = code.as_bytes();
    let line_of = |i: usize| code[..i].matches('\n').count() + 1;
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(off) = code[i..].find("fn ") {
        let at = i + off;
        i = at + 3;
        let word_start = at == 0 || !(b[at - 1].is_ascii_alphanumeric() || b[at - 1] == b'_');
        if !word_start {
            continue;
        }
        let name: String = code[i..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if name.is_empty() {
            continue;
        }
        // The body: the first `{` before a `;` (a declaration without a body has none).
        let Some(open) = code[i..].find(['{', ';']).map(|o| i + o) else {
            break;
        };
        if b[open] == b';' {
            continue;
        }
        let end = open + item_end(&code[open..]);
        out.push((
            line_of(at),
            name,
            line_of(end.saturating_sub(1)) - line_of(at) + 1,
        ));
    }
    out
}

/// The production functions under `root` longer than `limit` lines, longest first.
pub fn long_functions(root: &Path, limit: usize) -> Vec<Function> {
    let mut out = Vec::new();
    for file in production_files(root) {
        let src = std::fs::read_to_string(root.join(&file)).unwrap_or_default();
        for (line, name, lines) in functions(&src) {
            if lines > limit {
                out.push(Function {
                    file: file.clone(),
                    line,
                    name,
                    lines,
                });
            }
        }
    }
    out.sort_by_key(|f| std::cmp::Reverse(f.lines));
    out
}

/// Places in production code where an error is a `String`: `Result<…, String>`.
pub fn string_errors(root: &Path) -> Vec<(PathBuf, usize)> {
    let mut out = Vec::new();
    for file in production_files(root) {
        let src = std::fs::read_to_string(root.join(&file)).unwrap_or_default();
        let code = production_code(&src);
        let mut from = 0;
        while let Some(at) = code[from..].find("Result<") {
            let start = from + at + "Result<".len();
            from = start;
            if result_error(&code[start..]) == Some("String") {
                out.push((file.clone(), code[..start].matches('\n').count() + 1));
            }
        }
    }
    out
}

/// The error type of `Result<…>` whose arguments start `args`: its last top-level
/// argument, when it has two.
pub fn result_error(args: &str) -> Option<&str> {
    let mut depth = 0usize;
    let mut last_comma = None;
    for (i, c) in args.char_indices() {
        match c {
            '<' | '(' | '[' => depth += 1,
            ')' | ']' => depth = depth.saturating_sub(1),
            '>' if depth == 0 => return last_comma.map(|j| args[j + 1..i].trim()),
            '>' => depth -= 1,
            ',' if depth == 0 => last_comma = Some(i),
            _ => {}
        }
    }
    None
}

/// The workspace crates `crate_dir`'s `Cargo.toml` depends on (its `[dependencies]`
/// whose names start with `mcpgate-`).
pub fn internal_dependencies(root: &Path, crate_dir: &str) -> Vec<String> {
    let manifest = std::fs::read_to_string(root.join("crates").join(crate_dir).join("Cargo.toml"))
        .unwrap_or_default();
    let mut section = String::new();
    let mut out = Vec::new();
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line.to_owned();
        } else if section == "[dependencies]" && line.starts_with("mcpgate-") {
            let name = line.split(['.', '=', ' ']).next().unwrap_or_default();
            out.push(name.to_owned());
        }
    }
    out
}

/// Functions and types of production code whose name says `bridged` (the era bridge's
/// state lives in its own modules, named for what they hold, not for a flag), and
/// `bridged: bool` parameters.
pub fn bridged_names(root: &Path) -> Vec<(PathBuf, usize, String)> {
    let mut out = Vec::new();
    for file in production_files(root) {
        let src = std::fs::read_to_string(root.join(&file)).unwrap_or_default();
        let code = production_code(&src);
        for (n, line) in code.lines().enumerate() {
            let lower = line.to_ascii_lowercase();
            let named = ["fn ", "struct ", "enum ", "trait ", "type "]
                .iter()
                .any(|kw| {
                    lower.split(kw).skip(1).any(|rest| {
                        rest.split(|c: char| !c.is_alphanumeric() && c != '_')
                            .next()
                            .is_some_and(|w| w.contains("bridged"))
                    })
                });
            let flag = lower.replace(' ', "").contains("bridged:bool");
            if named || flag {
                out.push((file.clone(), n + 1, line.trim().to_owned()));
            }
        }
    }
    out
}
