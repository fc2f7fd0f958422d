//! nginx as the baseline: the best plain reverse proxy, measured in the same run as the
//! gateway, in front of the same upstream. Debian's `nginx` binary (or `$MCPGATE_BENCH_NGINX`)
//! with a generated config: one process (`master_process off`, so its CPU is one pid's),
//! `proxy_pass` to a keep-alive upstream pool, no buffering (SSE answers stream), no access
//! log. Skipped with a note when no nginx is installed.

use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};

use crate::procs::{self, Proc};

/// A running nginx and the directory holding its config and logs.
pub(crate) struct Nginx {
    proc: Proc,
    dir: PathBuf,
    /// Its MCP URL (the upstream's path on nginx's port).
    pub(crate) url: String,
}

impl Nginx {
    /// The process.
    pub(crate) fn proc(&self) -> &Proc {
        &self.proc
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The nginx binary, if there is one.
pub(crate) fn binary() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("MCPGATE_BENCH_NGINX") {
        return Some(PathBuf::from(p));
    }
    ["/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/bin/nginx"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
}

/// `nginx -v` (it prints on stderr).
pub(crate) fn version(bin: &Path) -> String {
    Command::new(bin)
        .arg("-v")
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stderr).trim().to_owned())
        .unwrap_or_else(|| "unknown".to_owned())
}

/// Starts nginx in front of `upstream_url` (`http://127.0.0.1:PORT/path`).
pub(crate) fn start(bin: &Path, upstream_url: &str, name: &str) -> Result<Nginx> {
    let rest = upstream_url
        .strip_prefix("http://")
        .ok_or_else(|| anyhow!("nginx baseline: upstream {upstream_url} is not http://"))?;
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    let port = free_port()?;
    let dir = std::env::temp_dir().join(format!("mcpgate-bench-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let d = dir.display();
    // One process, one event loop: the configuration the nginx figure was taken
    // with (1 worker), and what `worker_processes 1` costs per request.
    let conf = format!(
        "daemon off;\nmaster_process off;\nworker_processes 1;\npid {d}/nginx.pid;\n\
         error_log {d}/error.log warn;\n\
         events {{ worker_connections 4096; }}\n\
         http {{\n  access_log off;\n\
           client_body_temp_path {d}/body;\n  proxy_temp_path {d}/proxy;\n\
           fastcgi_temp_path {d}/fastcgi;\n  uwsgi_temp_path {d}/uwsgi;\n  scgi_temp_path {d}/scgi;\n\
           upstream up {{ server {authority}; keepalive 256; }}\n\
           server {{\n    listen 127.0.0.1:{port};\n\
             location / {{\n      proxy_pass http://up;\n      proxy_http_version 1.1;\n\
               proxy_set_header Connection \"\";\n      proxy_set_header Host {authority};\n      proxy_buffering off;\n\
               proxy_read_timeout 1h;\n    }}\n  }}\n}}\n"
    );
    let conf_path = dir.join("nginx.conf");
    std::fs::write(&conf_path, conf)
        .with_context(|| format!("cannot write {}", conf_path.display()))?;
    let mut cmd = Command::new(bin);
    cmd.arg("-p").arg(&dir).arg("-c").arg(&conf_path);
    let proc = procs::spawn_quiet(cmd, name, &dir.join("stderr.log"))?;
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
        if Instant::now() > deadline {
            let log = std::fs::read_to_string(dir.join("error.log")).unwrap_or_default();
            bail!("nginx did not start listening on {addr}: {log}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(Nginx {
        proc,
        url: format!("http://127.0.0.1:{port}/{path}"),
        dir,
    })
}

/// A port nobody listens on now (nginx binds it right after).
fn free_port() -> Result<u16> {
    let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).context("cannot bind a free port")?;
    Ok(l.local_addr()?.port())
}
