//! The official TypeScript SDK (npm `cloudflare` 5.x and 7.3) and wrangler (4.86 and 4.164), unchanged,
//! against the real app on a real port (tests/clients/; `bash tests/clients/setup.sh` installs them).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use sqlx::PgPool;

use crate::helpers::{spawn_app, TestApp};
use crate::listings::seed;

/// A flow that takes longer than this has hung. Each normally ends within 20 s, but eleven flows start
/// Node processes at once beside the rest of the suite, and on a busy 2-core machine one took over 90 s.
const FLOW_DEADLINE: Duration = Duration::from_secs(300);

fn clients_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients")
}

/// The Node that wrangler 4.164 needs (22.12+), installed from npm by setup.sh.
fn node22() -> PathBuf {
    clients_dir().join("node_modules/node/bin/node")
}

/// The machine's Node (20 or newer), which runs the SDK 5.x and wrangler 4.86.
const SYSTEM_NODE: &str = "node";

/// Runs `node script args...` against the app and returns its stdout, failing the test (with both
/// outputs) when the flow fails or does not end with `want` (its `N passed, 0 failed` line).
async fn run_flow(app: &TestApp, node: &Path, script: &str, args: &[&str], want: &str) -> String {
    let dir = clients_dir();
    for needed in ["node_modules/.skiplock-installed", "node_modules/node/bin/node"] {
        assert!(
            dir.join(needed).exists(),
            "{} is missing: run `bash tests/clients/setup.sh` (make test does)",
            dir.join(needed).display()
        );
    }
    // A clean environment: Cloudflare credentials or proxies of the caller must not reach the clients.
    let child = tokio::process::Command::new(node)
        .arg(dir.join(script))
        .args(args)
        .current_dir(&dir)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", std::env::temp_dir())
        .env("SKIPLOCK_BASE_URL", format!("{}/client/v4", app.address))
        .env("SKIPLOCK_TOKEN", &app.token)
        .env("SKIPLOCK_ACCOUNT", app.account.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("{} does not start: {e}", node.display()));
    let output = tokio::time::timeout(FLOW_DEADLINE, child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("{script} {args:?} did not finish within {FLOW_DEADLINE:?}"))
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{script} {args:?} failed ({}):\n{stdout}\n{stderr}", output.status);
    assert!(stdout.lines().any(|l| l.ends_with(want)), "{script} {args:?}: expected `{want}`:\n{stdout}\n{stderr}");
    stdout
}

/// The Node major version a flow reports in its first line (`... on node vNN.x.y ...`).
fn node_major(stdout: &str) -> u32 {
    let version = stdout.split(" on node v").nth(1).unwrap_or_else(|| panic!("no node version in:\n{stdout}"));
    version.split('.').next().and_then(|m| m.parse().ok()).unwrap_or_else(|| panic!("bad version in:\n{stdout}"))
}

async fn sdk(pool: PgPool, node: &Path, args: &[&str], want: &str) -> String {
    let app = spawn_app(pool).await;
    run_flow(&app, node, "sdk.mjs", args, want).await
}

async fn wrangler(pool: PgPool, version: &str, node: &Path, flow: &str, want: &str) -> String {
    let app = spawn_app(pool).await;
    let node_arg = node.to_string_lossy().into_owned();
    run_flow(
        &app,
        Path::new(SYSTEM_NODE),
        "wrangler.mjs",
        &["--wrangler", version, "--node", &node_arg, "--flow", flow],
        want,
    )
    .await
}

// ---- TypeScript SDK ---------------------------------------------------------------------------------

#[sqlx::test]
async fn the_typescript_sdk_5_works_unchanged_on_the_system_node(pool: PgPool) {
    let out = sdk(pool, Path::new(SYSTEM_NODE), &["--sdk", "5"], "sdk flow: 22 passed, 0 failed").await;
    assert!(out.contains("cloudflare 5."), "{out}");
    assert!(node_major(&out) >= 20, "the SDK 5.x flow needs Node 20 or newer:\n{out}");
}

#[sqlx::test]
async fn the_typescript_sdk_7_works_unchanged_on_node_22(pool: PgPool) {
    let out = sdk(pool, &node22(), &["--sdk", "7"], "sdk flow: 24 passed, 0 failed").await;
    assert!(out.contains("cloudflare 7.3.0"), "{out}");
    assert_eq!(node_major(&out), 22, "{out}");
}

#[sqlx::test]
async fn the_typescript_sdk_7_works_unchanged_on_the_system_node(pool: PgPool) {
    let out = sdk(pool, Path::new(SYSTEM_NODE), &["--sdk", "7"], "sdk flow: 24 passed, 0 failed").await;
    assert!(node_major(&out) >= 20, "{out}");
}

#[sqlx::test]
async fn the_typescript_sdk_7_creates_a_queue_and_its_dead_letter_queue_in_a_jurisdiction(pool: PgPool) {
    sdk(pool, &node22(), &["--sdk", "7", "--flow", "jurisdiction"], "sdk flow: 4 passed, 0 failed").await;
}

/// Both SDKs' own iteration over every list (`for await`) ends and yields each item once: 45 queues (more
/// than a page of 20, in one unpaged answer), tokens by 10 and 20, redrive tasks through the SDK's
/// paginator, the one account and membership, the one consumer and no event subscription (those two lists
/// cannot outgrow a page: see tests/clients/listings.mjs).
#[sqlx::test]
async fn the_typescript_sdks_walk_every_list_to_its_end(pool: PgPool) {
    let app = spawn_app(pool).await;
    let expect = seed(&app).await.expectations();
    for major in ["5", "7"] {
        let args = ["--sdk", major, "--expect", &expect];
        run_flow(&app, Path::new(SYSTEM_NODE), "listings.mjs", &args, "listings flow: 7 passed, 0 failed").await;
    }
}

// ---- wrangler ---------------------------------------------------------------------------------------

const WRANGLER_QUEUE_STEPS: &str = "wrangler flow: 11 passed, 0 failed";

#[sqlx::test]
async fn wrangler_4_86_queue_commands_work_with_an_account_id(pool: PgPool) {
    let out = wrangler(pool, "4.86", Path::new(SYSTEM_NODE), "core", WRANGLER_QUEUE_STEPS).await;
    assert!(out.contains("wrangler 4.86.0"), "{out}");
}

#[sqlx::test]
async fn wrangler_4_164_queue_commands_work_with_an_account_id(pool: PgPool) {
    let out = wrangler(pool, "4.164", &node22(), "core", WRANGLER_QUEUE_STEPS).await;
    assert!(out.contains("wrangler 4.164.0") && node_major(&out) == 22, "{out}");
}

/// Without CLOUDFLARE_ACCOUNT_ID wrangler finds the account through GET /accounts and /memberships.
#[sqlx::test]
async fn wrangler_4_86_queue_commands_work_without_an_account_id(pool: PgPool) {
    wrangler(pool, "4.86", Path::new(SYSTEM_NODE), "no-account-id", WRANGLER_QUEUE_STEPS).await;
}

#[sqlx::test]
async fn wrangler_4_164_queue_commands_work_without_an_account_id(pool: PgPool) {
    wrangler(pool, "4.164", &node22(), "no-account-id", WRANGLER_QUEUE_STEPS).await;
}

#[sqlx::test]
async fn wrangler_4_86_whoami_shows_the_account(pool: PgPool) {
    wrangler(pool, "4.86", Path::new(SYSTEM_NODE), "whoami", "wrangler flow: 2 passed, 0 failed").await;
}

#[sqlx::test]
async fn wrangler_4_164_whoami_shows_the_account(pool: PgPool) {
    wrangler(pool, "4.164", &node22(), "whoami", "wrangler flow: 2 passed, 0 failed").await;
}

#[sqlx::test]
async fn wrangler_4_164_creates_a_queue_in_a_jurisdiction(pool: PgPool) {
    wrangler(pool, "4.164", &node22(), "jurisdiction", "wrangler flow: 2 passed, 0 failed").await;
}
