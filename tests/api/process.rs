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
            .env("SKIPLOCK_ADMIN_BIND", "127.0.0.1:0")
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
