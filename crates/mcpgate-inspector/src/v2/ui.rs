//! The Inspector v2 UI's files (`clients/web/dist` of npm `@modelcontextprotocol/inspector`
//! 2.x), served from the backend's own origin as the UI requires: its API base is
//! `window.location.origin`. `index.html` gets the API token the way the Inspector's own
//! server gives it (a `window.__INSPECTOR_API_TOKEN__` script before `</head>`); a path
//! that names no file is the app's own route and gets `index.html` too. Files are read at
//! start and kept in memory (the build is a few MB), so no request touches the file system.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use mcpgate_server::body::{Body, full};

use crate::error::UiError;

/// The UI's files, by URL path.
pub(crate) struct Ui {
    files: HashMap<String, (Bytes, &'static str)>,
    index: Bytes,
}

/// The directory holding the UI (`…/clients/web/dist`) under `dir`, if `dir` is one or holds
/// an npm install of the Inspector.
pub(crate) fn find_ui(dir: &Path) -> Option<PathBuf> {
    [
        dir.to_path_buf(),
        dir.join("clients/web/dist"),
        dir.join("node_modules/@modelcontextprotocol/inspector/clients/web/dist"),
    ]
    .into_iter()
    .find(|d| d.join("index.html").is_file())
}

fn content_type(path: &str) -> &'static str {
    match path.rsplit_once('.').map(|(_, e)| e) {
        Some("html") => "text/html; charset=utf-8",
        Some("js" | "mjs") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        Some("ico") => "image/x-icon",
        Some("json" | "map") => "application/json",
        Some("woff2") => "font/woff2",
        Some("woff") => "font/woff",
        Some("txt") => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

/// `index.html` with the token script before `</head>` (or `</body>`, or in front).
fn inject(html: &str, token: Option<&str>) -> String {
    let Some(token) = token else {
        return html.to_owned();
    };
    // As JSON, with `<` escaped, so the value cannot close the script element.
    let value = serde_json::Value::from(token)
        .to_string()
        .replace('<', "\\u003c");
    let script = format!("<script>window.__INSPECTOR_API_TOKEN__ = {value};</script>");
    match html.find("</head>").or_else(|| html.find("</body>")) {
        Some(at) => format!("{}{script}{}", &html[..at], &html[at..]),
        None => format!("{script}{html}"),
    }
}

/// The URL path of the file `p` under `dir` (`None` when it is not under it, or its name
/// is not UTF-8).
fn url_path(dir: &Path, p: &Path) -> Option<String> {
    let rel = p.strip_prefix(dir).ok()?.to_str()?;
    Some(format!("/{}", rel.replace('\\', "/")))
}

impl Ui {
    /// Reads every file under `dir` (at most 64 MB in all).
    pub(crate) fn load(dir: &Path, token: Option<&str>) -> Result<Ui, UiError> {
        let index_path = dir.join("index.html");
        let index = std::fs::read_to_string(&index_path).map_err(|source| UiError::Read {
            path: index_path,
            source,
        })?;
        let mut files = HashMap::new();
        let mut total = 0usize;
        let mut todo = vec![dir.to_path_buf()];
        while let Some(d) = todo.pop() {
            let entries = std::fs::read_dir(&d).map_err(|source| UiError::Read {
                path: d.clone(),
                source,
            })?;
            for e in entries.flatten() {
                let p = e.path();
                // Followed: a symlinked directory is a directory.
                let Ok(kind) = std::fs::metadata(&p) else {
                    continue;
                };
                if kind.is_dir() {
                    todo.push(p);
                    continue;
                }
                let Some(url) = url_path(dir, &p) else {
                    continue;
                };
                let bytes =
                    std::fs::read(&p).map_err(|source| UiError::Read { path: p, source })?;
                total += bytes.len();
                if total > 64 << 20 {
                    return Err(UiError::TooLarge {
                        dir: dir.to_path_buf(),
                    });
                }
                let ctype = content_type(&url);
                files.insert(url, (Bytes::from(bytes), ctype));
            }
        }
        Ok(Ui {
            files,
            index: Bytes::from(inject(&index, token)),
        })
    }

    /// The answer to `GET path`.
    pub(crate) fn serve(&self, path: &str) -> Response<Body> {
        let (bytes, ctype, immutable) = match self.files.get(path) {
            Some(_) if path == "/index.html" => {
                (self.index.clone(), "text/html; charset=utf-8", false)
            }
            Some((b, t)) => (b.clone(), *t, path.starts_with("/assets/")),
            // A missing asset is a 404; any other path is one of the app's routes.
            None if path.starts_with("/assets/") => {
                return crate::v2::reply::error(StatusCode::NOT_FOUND, "Not found");
            }
            None => (self.index.clone(), "text/html; charset=utf-8", false),
        };
        let mut r = Response::new(full(bytes));
        let h = r.headers_mut();
        h.insert(header::CONTENT_TYPE, HeaderValue::from_static(ctype));
        h.insert(
            header::CACHE_CONTROL,
            HeaderValue::from_static(if immutable {
                "public, max-age=31536000, immutable"
            } else {
                "no-store"
            }),
        );
        h.insert(
            "x-content-type-options",
            HeaderValue::from_static("nosniff"),
        );
        // The page holding the token is never framed by another site.
        h.insert("x-frame-options", HeaderValue::from_static("DENY"));
        r
    }
}

#[cfg(test)]
mod tests {
    use super::inject;

    #[test]
    fn the_token_goes_before_head_and_cannot_close_the_script() {
        let html = "<html><head><title>x</title></head><body></body></html>";
        let out = inject(html, Some("ab</script><b>"));
        assert!(out.contains(
            r#"<script>window.__INSPECTOR_API_TOKEN__ = "ab\u003c/script>\u003cb>";</script></head>"#
        ));
        assert_eq!(inject(html, None), html);
        assert!(inject("<p>", Some("t")).starts_with("<script>"));
    }
}
