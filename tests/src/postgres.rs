//! A real PostgreSQL server (Debian's package) for the tests: a fresh cluster in a
//! temporary directory, on a free loopback port, stopped (and the directory removed) when
//! dropped. As root, the server runs as the `postgres` user (it refuses root).

use std::path::PathBuf;
use std::process::Command;

/// A running PostgreSQL cluster.
#[derive(Debug)]
pub struct Postgres {
    dir: PathBuf,
    bin: PathBuf,
    /// Its port on 127.0.0.1.
    pub port: u16,
}

/// Debian's PostgreSQL binaries (`/usr/lib/postgresql/{version}/bin`).
fn bin_dir() -> PathBuf {
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|d| d.flatten().map(|e| e.path().join("bin")).collect())
        .unwrap_or_default();
    found.retain(|p| p.join("initdb").exists());
    found.sort();
    found.pop().unwrap_or_else(|| {
        panic!("PostgreSQL is not installed: scripts/setup-system-deps installs it (apt-get install postgresql)")
    })
}

/// Whether the tests run as root (the owner of `/proc/self` is the effective user).
fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// `program`, run as the user PostgreSQL runs as.
fn command(program: &std::path::Path) -> Command {
    if is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(program);
        c
    } else {
        Command::new(program)
    }
}

/// Runs `program args` as the user PostgreSQL runs as; panics with its output on failure.
fn run(program: &std::path::Path, args: &[&str]) {
    let out = command(program).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{} {args:?}: {}\n{}",
        program.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Postgres {
    /// A new cluster, started, with a database `vault` that user `mcpgate` (password
    /// `pw`) owns.
    pub fn start() -> Postgres {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("mcpgate-pg-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        if is_root() {
            let out = Command::new("chown")
                .args(["postgres:postgres"])
                .arg(&dir)
                .output()
                .unwrap();
            assert!(out.status.success(), "chown {}", dir.display());
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let pg = Postgres {
            dir,
            bin: bin_dir(),
            port,
        };
        let data = pg.data();
        run(
            &pg.bin.join("initdb"),
            &["-D", &data, "-A", "trust", "-U", "mcpgate", "--no-sync"],
        );
        pg.up();
        run(
            &pg.bin.join("psql"),
            &[
                "-h",
                "127.0.0.1",
                "-p",
                &port.to_string(),
                "-U",
                "mcpgate",
                "-d",
                "postgres",
                "-c",
                "CREATE DATABASE vault",
            ],
        );
        pg
    }

    fn data(&self) -> String {
        self.dir.join("data").display().to_string()
    }

    /// Starts the server (again).
    pub fn up(&self) {
        let opts = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off",
            self.port,
            self.dir.display()
        );
        let log = self.dir.join("log").display().to_string();
        run(
            &self.bin.join("pg_ctl"),
            &["-D", &self.data(), "-o", &opts, "-l", &log, "-w", "start"],
        );
    }

    /// Stops the server now (clients' connections break).
    pub fn down(&self) {
        run(
            &self.bin.join("pg_ctl"),
            &["-D", &self.data(), "-m", "immediate", "-w", "stop"],
        );
    }

    /// The database's URL.
    pub fn url(&self) -> String {
        format!("postgres://mcpgate:pw@127.0.0.1:{}/vault", self.port)
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let _ = command(&self.bin.join("pg_ctl"))
            .args(["-D", &self.data(), "-m", "immediate", "stop"])
            .output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
