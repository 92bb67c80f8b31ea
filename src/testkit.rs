//! A PostgreSQL server of one's own, for tests and the chaos suite that stop and restart it. Uses the
//! machine's initdb and pg_ctl (as the postgres user when running as root).

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Command, Output};

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").expect("a free port").local_addr().expect("an address").port()
}

/// A PostgreSQL server of a test's own, in a temporary folder, that the test may stop and start.
pub struct TempCluster {
    dir: PathBuf,
    bin: PathBuf,
    pub port: u16,
    /// Server settings beyond the defaults, as `-c name=value` options.
    settings: Vec<String>,
}

fn pg_bin_dir() -> PathBuf {
    if let Ok(out) = Command::new("pg_config").arg("--bindir").output() {
        let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        if dir.join("initdb").exists() {
            return dir;
        }
    }
    let mut found: Vec<_> = std::fs::read_dir("/usr/lib/postgresql")
        .expect("PostgreSQL's server programs are installed (make test does it)")
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|p| p.join("initdb").exists())
        .collect();
    found.sort();
    found.pop().expect("an initdb under /usr/lib/postgresql")
}

fn is_root() -> bool {
    Command::new("id").arg("-u").output().map(|o| o.stdout.starts_with(b"0")).unwrap_or(false)
}

impl TempCluster {
    fn run(&self, program: &str, args: &[&str]) -> Output {
        let path = self.bin.join(program);
        let mut cmd = if is_root() {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(path);
            c
        } else {
            Command::new(path)
        };
        cmd.args(args).output().unwrap()
    }

    pub fn create() -> TempCluster {
        Self::create_with(&[])
    }

    /// A cluster started with these server settings (name, value) as well.
    pub fn create_with(settings: &[(&str, &str)]) -> TempCluster {
        let dir = std::env::temp_dir().join(format!("skiplock-pg-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        if is_root() {
            Command::new("chown").args(["postgres", dir.to_str().unwrap()]).status().unwrap();
        }
        let settings = settings.iter().map(|(name, value)| format!("-c {name}={value}")).collect();
        let cluster = TempCluster { dir, bin: pg_bin_dir(), port: free_port(), settings };
        let data = cluster.dir.join("data");
        let out =
            cluster.run("initdb", &["-D", data.to_str().unwrap(), "-U", "postgres", "--auth=trust", "-E", "UTF8"]);
        assert!(out.status.success(), "initdb: {}", String::from_utf8_lossy(&out.stderr));
        cluster.start();
        cluster
    }

    /// A program of the machine's PostgreSQL (pgbench, psql).
    pub fn program(&self, name: &str) -> PathBuf {
        self.bin.join(name)
    }

    /// The cluster's data directory.
    pub fn data_dir(&self) -> PathBuf {
        self.dir.join("data")
    }

    pub fn url(&self, database: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{database}", self.port)
    }

    pub fn start(&self) {
        let data = self.dir.join("data");
        let log = self.dir.join("server.log");
        let options =
            // Room for a benchmark's peers side by side (pgbench and client pools of 64 connections each).
            format!(
                "-c listen_addresses=127.0.0.1 -p {} -c unix_socket_directories={} -c max_connections=300 {}",
                self.port,
                self.dir.display(),
                self.settings.join(" ")
            );
        // Right after an immediate stop, a start can fail while the old server's last processes are
        // still going away (seen once in CI); it is tried again then, for up to 10 s.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let out = self.run(
                "pg_ctl",
                &["-D", data.to_str().unwrap(), "-l", log.to_str().unwrap(), "-w", "-o", &options, "start"],
            );
            if out.status.success() {
                return;
            }
            if std::time::Instant::now() > deadline {
                let log = std::fs::read_to_string(&log).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(20).collect();
                panic!(
                    "pg_ctl start: {}\nthe server's log ends:\n{}",
                    String::from_utf8_lossy(&out.stderr),
                    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                );
            }
            std::thread::sleep(std::time::Duration::from_millis(500));
        }
    }

    /// Stops at once, as a crash would: no checkpoint, connections cut.
    pub fn stop_immediately(&self) {
        let data = self.dir.join("data");
        let out = self.run("pg_ctl", &["-D", data.to_str().unwrap(), "-m", "immediate", "-w", "stop"]);
        assert!(out.status.success(), "pg_ctl stop: {}", String::from_utf8_lossy(&out.stderr));
    }
}

impl Drop for TempCluster {
    fn drop(&mut self) {
        let data = self.dir.join("data");
        self.run("pg_ctl", &["-D", data.to_str().unwrap(), "-m", "immediate", "stop"]);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
