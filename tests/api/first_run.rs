use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use sqlx::Connection;

fn is_root() -> bool {
    std::process::Command::new("id").arg("-u").output().map(|o| o.stdout.starts_with(b"0\n")).unwrap_or(false)
}

/// Runs `make TARGET` in the checkout as a newcomer would: no DATABASE_URL and no port of their own.
async fn make(checkout: &Path, target: &str) -> String {
    let run = tokio::process::Command::new("make")
        .args(["-s", "--no-print-directory", target])
        .current_dir(checkout)
        .env_remove("DATABASE_URL")
        .env_remove("SKIPLOCK_PG_PORT")
        .env_remove("SKIPLOCK_PG_ROOT")
        .output();
    let out = tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .unwrap_or_else(|_| panic!("make {target} took over 60 s"))
        .expect("make runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "make {target} failed ({}):\n{stdout}\n{stderr}", out.status);
    stdout
}

/// Stops and removes the copy's cluster and the private directory, even when the test fails midway.
struct Cleanup {
    home: PathBuf,
    checkout: PathBuf,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        for command in ["stop", "destroy"] {
            let _ = std::process::Command::new(self.checkout.join("scripts/pg.sh")).arg(command).output();
        }
        let _ = std::fs::remove_dir_all(&self.home);
    }
}

/// A clone in a home directory, as root: the home is closed to every other user (mode 700), so the
/// postgres user the cluster runs as cannot enter the checkout. `make db-up` must still give a working
/// cluster (kept outside the checkout, which `.data/pg` points to), `make db-down` stop it and
/// `make clean` delete it, outside folder included.
#[tokio::test]
async fn a_checkout_in_a_private_home_gets_a_cluster_as_root() {
    if !is_root() {
        eprintln!("skipped: this checks what root sees; run the tests as root to run it");
        return;
    }
    let home = std::env::temp_dir().join(format!("skiplock-first-run-{}", uuid::Uuid::new_v4().simple()));
    let checkout = home.join("skiplock");
    let _cleanup = Cleanup { home: home.clone(), checkout: checkout.clone() };
    std::fs::create_dir_all(checkout.join("scripts")).unwrap();
    std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o700)).unwrap();
    let source = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::copy(source.join("scripts/pg.sh"), checkout.join("scripts/pg.sh")).unwrap();
    std::fs::copy(source.join("Makefile"), checkout.join("Makefile")).unwrap();

    let url = make(&checkout, "db-up").await.trim().to_owned();
    assert!(url.starts_with("postgres://postgres@127.0.0.1:"), "make db-up printed {url:?}");
    let mut conn = sqlx::PgConnection::connect(&url).await.expect("the printed URL accepts a connection");
    let one: i32 = sqlx::query_scalar("select 1").fetch_one(&mut conn).await.unwrap();
    assert_eq!(one, 1);
    conn.close().await.unwrap();

    // The cluster is outside the private home, and the checkout says where.
    let outside = std::fs::read_link(checkout.join(".data/pg")).expect(".data/pg is a symlink to the cluster");
    assert!(outside.is_absolute() && !outside.starts_with(&home), "the cluster is at {}", outside.display());
    assert!(outside.join("PG_VERSION").exists(), "{} holds the cluster", outside.display());
    assert!(outside.join("postmaster.pid").exists(), "the server runs from {}", outside.display());

    // A second start finds the running cluster and prints the same URL.
    assert_eq!(make(&checkout, "db-up").await.trim(), url);

    make(&checkout, "db-down").await;
    assert!(!outside.join("postmaster.pid").exists(), "make db-down stopped the server");
    assert!(sqlx::PgConnection::connect(&url).await.is_err(), "nothing answers at {url} after make db-down");
    assert!(outside.join("PG_VERSION").exists(), "make db-down keeps the data");

    make(&checkout, "clean").await;
    assert!(!outside.exists(), "make clean deleted {}", outside.display());
    assert!(!checkout.join(".data").exists(), "make clean deleted .data");
}
