//! A real nginx (`$MCPGATE_TEST_NGINX`, or `nginx` on `PATH` or in the sbin folders) running
//! one of the shipped configs with its replica addresses and listen port replaced by
//! loopback ones, and the helpers that read those configs from the repository.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::gateway::children_of;

/// A real nginx, a child of this test, running a shipped config (`deploy/nginx/mcpgate.conf`,
/// the Kubernetes router's `mcpgate.conf`); fast shutdown on drop.
#[derive(Debug)]
pub struct Nginx {
    child: Option<Child>,
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    dir: PathBuf,
}

impl Nginx {
    /// Starts nginx with `shipped` (an http-context config, from the file `source`) with
    /// `replacements` applied (each must occur) and `listen 8080;` moved to a free loopback
    /// port; waits until it answers `/nginx-health`.
    pub async fn start(source: &str, shipped: &str, replacements: &[(String, String)]) -> Nginx {
        let bin = nginx_binary();
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "mcpgate-nginx-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        let mut last_log = String::new();
        for _attempt in 0..5 {
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            let port = free_port();
            let mut conf = shipped.to_owned();
            for (from, to) in replacements.iter().cloned().chain([(
                "listen 8080;".to_string(),
                format!("listen 127.0.0.1:{port};"),
            )]) {
                assert!(
                    conf.contains(&from),
                    "{source} no longer contains `{from}`: keep tests/tests/gateway/replicas/ in step"
                );
                conf = conf.replace(&from, &to);
            }
            std::fs::write(dir.join("mcpgate.conf"), conf).unwrap();
            let d = dir.display();
            std::fs::write(
                dir.join("nginx.conf"),
                format!(
                    "worker_processes 1;\npid {d}/nginx.pid;\nerror_log {d}/error.log info;\n\
                     events {{ worker_connections 1024; }}\n\
                     http {{\n\
                       client_body_temp_path {d}/client_body;\n  proxy_temp_path {d}/proxy;\n\
                       fastcgi_temp_path {d}/fastcgi;\n  uwsgi_temp_path {d}/uwsgi;\n  scgi_temp_path {d}/scgi;\n\
                       include {d}/mcpgate.conf;\n\
                       log_format routed '$request_method $request_uri $status session=$http_mcp_session_id upstream=$upstream_addr';\n\
                       access_log {d}/access.log routed;\n\
                     }}\n"
                ),
            )
            .unwrap();
            let mut child = Command::new(&bin)
                .arg("-e")
                .arg(dir.join("error.log"))
                .arg("-p")
                .arg(&dir)
                .arg("-c")
                .arg(dir.join("nginx.conf"))
                .args(["-g", "daemon off;"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(dir.join("stderr.log")).unwrap())
                .spawn()
                .unwrap_or_else(|e| panic!("spawn {}: {e}", bin.display()));
            let base = format!("http://127.0.0.1:{port}");
            let health = format!("{base}/nginx-health");
            let until = Instant::now() + Duration::from_secs(10);
            loop {
                if let Ok(Some(status)) = child.try_wait() {
                    last_log = format!(
                        "nginx exited with {status}:\n{}{}",
                        std::fs::read_to_string(dir.join("stderr.log")).unwrap_or_default(),
                        std::fs::read_to_string(dir.join("error.log")).unwrap_or_default()
                    );
                    break;
                }
                if let Ok(r) = reqwest::get(&health).await
                    && r.status().as_u16() == 200
                {
                    return Nginx {
                        child: Some(child),
                        base,
                        dir,
                    };
                }
                if Instant::now() > until {
                    let _ = child.kill();
                    let _ = child.wait();
                    last_log = format!(
                        "nginx did not answer on {health}:\n{}",
                        std::fs::read_to_string(dir.join("error.log")).unwrap_or_default()
                    );
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            if !last_log.contains("Address already in use") {
                break;
            }
        }
        panic!("could not start nginx: {last_log}");
    }

    /// Its error log so far.
    pub fn error_log(&self) -> String {
        std::fs::read_to_string(self.dir.join("error.log")).unwrap_or_default()
    }

    /// Its access log so far (method, URI, status, session, upstream address).
    pub fn access_log(&self) -> String {
        std::fs::read_to_string(self.dir.join("access.log")).unwrap_or_default()
    }
}

impl Drop for Nginx {
    /// Fast shutdown (SIGTERM) of the master, which stops its workers; SIGKILL for both
    /// if that takes more than 5 s.
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let workers = children_of(child.id());
            let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM);
            let until = Instant::now() + Duration::from_secs(5);
            loop {
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                if Instant::now() > until {
                    let _ = child.kill();
                    let _ = child.wait();
                    for w in workers {
                        let _ = kill(Pid::from_raw(w as i32), Signal::SIGKILL);
                    }
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The nginx binary: `$MCPGATE_TEST_NGINX`, else `nginx` on `PATH` or in the sbin folders.
fn nginx_binary() -> PathBuf {
    let candidates: Vec<PathBuf> = match std::env::var_os("MCPGATE_TEST_NGINX") {
        Some(p) => vec![p.into()],
        None => std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
            .unwrap_or_default()
            .into_iter()
            .chain(["/usr/sbin", "/usr/local/sbin", "/sbin"].map(PathBuf::from))
            .map(|d| d.join("nginx"))
            .collect(),
    };
    candidates
        .into_iter()
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "nginx not found: this test runs mcpgate replicas behind a real nginx. \
                 Install it (Debian/Ubuntu: `apt-get install -y nginx`) or set \
                 MCPGATE_TEST_NGINX to the nginx binary."
            )
        })
}

/// A loopback port that was free a moment ago.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap()
}

/// The text of a `key: |` block scalar in a ConfigMap manifest (no YAML parser needed for
/// the one shape the manifests use).
pub fn configmap_entry(manifest: &str, key: &str) -> String {
    let mut lines = manifest
        .lines()
        .skip_while(|l| l.trim() != format!("{key}: |"));
    let header = lines
        .next()
        .unwrap_or_else(|| panic!("no `{key}: |` in the manifest"));
    let indent = header.len() - header.trim_start().len() + 2;
    let mut out = String::new();
    for l in lines {
        if !l.trim().is_empty() && l.len() - l.trim_start().len() < indent {
            break;
        }
        out.push_str(l.get(indent..).unwrap_or(""));
        out.push('\n');
    }
    out
}

/// A file of the repository, by its path from the workspace root.
pub fn repo_file(path: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    std::fs::read_to_string(root.join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// `http://127.0.0.1:1234` → `127.0.0.1:1234`.
pub fn host_port(base: &str) -> String {
    base.strip_prefix("http://").unwrap_or(base).to_owned()
}
