//! The real `skiplock` binary as a child process, on a test's own database.

use std::net::TcpListener;
use std::process::Stdio;
use std::time::{Duration, Instant};

use sqlx::PgPool;
use tokio::process::{Child, Command};

/// The URL of the test's own database, built from DATABASE_URL and the pool's database name.
pub fn database_url(pool: &PgPool) -> String {
    let base = std::env::var("DATABASE_URL").expect("DATABASE_URL is set by `make test`");
    let name = pool.connect_options().get_database().expect("sqlx::test names its database").to_owned();
    let (server, query) = match base.split_once('?') {
        Some((s, q)) => (s.to_owned(), format!("?{q}")),
        None => (base.clone(), String::new()),
    };
    let server = server.rsplit_once('/').map(|(s, _)| s.to_owned()).unwrap_or(server);
    format!("{server}/{name}{query}")
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

pub struct Server {
    pub child: Child,
    pub address: String,
}

impl Server {
    /// Starts `skiplock serve` and waits until it answers /healthz.
    pub async fn start(database_url: &str, port: u16) -> Server {
        Self::start_with(database_url, port, &[], &[]).await
    }

    pub async fn start_with(database_url: &str, port: u16, args: &[&str], env: &[(&str, &str)]) -> Server {
        let child = Command::new(env!("CARGO_BIN_EXE_skiplock"))
            .arg("serve")
            .args(args)
            .env("SKIPLOCK_METRICS_BIND", format!("127.0.0.1:{}", free_port()))
            .envs(env.iter().copied())
            .env("DATABASE_URL", database_url)
            .env("SKIPLOCK_BIND", format!("127.0.0.1:{port}"))
            .env("SKIPLOCK_LOG", "warn")
            .stdout(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("the skiplock binary starts");
        let address = format!("http://127.0.0.1:{port}");
        let client = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(resp) = client.get(format!("{address}/healthz")).send().await {
                if resp.status().is_success() {
                    break;
                }
            }
            assert!(Instant::now() < deadline, "skiplock did not come up on {address}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Server { child, address }
    }

    /// SIGKILL: no chance to flush or finish anything.
    pub async fn kill(mut self) {
        self.child.kill().await.unwrap();
    }
}

/// A PostgreSQL server of a test's own, in a temporary folder, that the test may stop and start.
pub struct TempCluster {
    dir: std::path::PathBuf,
    bin: std::path::PathBuf,
    pub port: u16,
}

fn pg_bin_dir() -> std::path::PathBuf {
    if let Ok(out) = std::process::Command::new("pg_config").arg("--bindir").output() {
        let dir = std::path::PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
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
    std::process::Command::new("id").arg("-u").output().map(|o| o.stdout.starts_with(b"0")).unwrap_or(false)
}

impl TempCluster {
    fn run(&self, program: &str, args: &[&str]) -> std::process::Output {
        let path = self.bin.join(program);
        let mut cmd = if is_root() {
            let mut c = std::process::Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(path);
            c
        } else {
            std::process::Command::new(path)
        };
        cmd.args(args).output().unwrap()
    }

    pub fn create() -> TempCluster {
        let dir = std::env::temp_dir().join(format!("skiplock-pg-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        if is_root() {
            std::process::Command::new("chown").args(["postgres", dir.to_str().unwrap()]).status().unwrap();
        }
        let cluster = TempCluster { dir, bin: pg_bin_dir(), port: free_port() };
        let data = cluster.dir.join("data");
        let out =
            cluster.run("initdb", &["-D", data.to_str().unwrap(), "-U", "postgres", "--auth=trust", "-E", "UTF8"]);
        assert!(out.status.success(), "initdb: {}", String::from_utf8_lossy(&out.stderr));
        cluster.start();
        cluster
    }

    pub fn url(&self, database: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{database}", self.port)
    }

    pub fn start(&self) {
        let data = self.dir.join("data");
        let log = self.dir.join("server.log");
        let options =
            format!("-c listen_addresses=127.0.0.1 -p {} -c unix_socket_directories={}", self.port, self.dir.display());
        let out = self
            .run("pg_ctl", &["-D", data.to_str().unwrap(), "-l", log.to_str().unwrap(), "-w", "-o", &options, "start"]);
        assert!(out.status.success(), "pg_ctl start: {}", String::from_utf8_lossy(&out.stderr));
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
