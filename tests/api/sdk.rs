use std::path::Path;

use sqlx::PgPool;

use crate::helpers::{spawn_app, TestApp};
use crate::listings::seed;

/// Runs `script` (under tests/sdk/) with `args` and the venv's Python against `app`; returns its stdout,
/// having asserted that it succeeded.
async fn run_sdk_script(app: &TestApp, script: &str, args: &[&str]) -> String {
    let root = env!("CARGO_MANIFEST_DIR");
    let python = Path::new(root).join(".venv/bin/python");
    assert!(python.exists(), "{} is missing: `make test` creates it (make venv)", python.display());
    let output = tokio::process::Command::new(python)
        .arg(Path::new(root).join("tests/sdk").join(script))
        .args(args)
        .env("SKIPLOCK_BASE_URL", format!("{}/client/v4", app.address))
        .env("SKIPLOCK_TOKEN", &app.token)
        .env("SKIPLOCK_ACCOUNT", app.account.to_string())
        .env("SKIPLOCK_METRICS_URL", &app.metrics_address)
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{script} failed:\n{stdout}\n{stderr}");
    stdout
}

/// The official Python SDK `cloudflare`, unchanged, drives the whole pull path (tests/sdk/), and a misspelt
/// field in its publishes is refused by name.
#[sqlx::test]
async fn the_official_python_sdk_works_unchanged(pool: PgPool) {
    let app = spawn_app(pool).await;
    let stdout = run_sdk_script(&app, "cloudflare_sdk_flow.py", &[]).await;
    assert!(stdout.contains("18 passed, 0 failed"), "{stdout}");
}

/// The same SDK reaches long polling and lease extension through its raw-request escape hatch: a
/// waiting pull gets the message published meanwhile, and heartbeats keep it from a second pull.
#[sqlx::test]
async fn the_official_python_sdk_long_polls_and_extends_leases_through_its_escape_hatch(pool: PgPool) {
    let app = spawn_app(pool).await;
    let stdout = run_sdk_script(&app, "long_poll_extend.py", &[]).await;
    assert!(stdout.contains("4 passed, 0 failed"), "{stdout}");
}

/// The SDK's own iteration over every list (`for queue in client.queues.list(...)`) ends and yields each
/// item once: 45 queues (more than a page of 20, in one unpaged answer), tokens by 10 and 20, redrive
/// tasks through the SDK's paginator, the one account and membership, the one consumer and no event
/// subscription (those two lists cannot outgrow a page: see tests/sdk/listings_flow.py).
#[sqlx::test]
async fn the_official_python_sdk_walks_every_list_to_its_end(pool: PgPool) {
    let app = spawn_app(pool).await;
    let seeded = seed(&app).await;
    let stdout = run_sdk_script(&app, "listings_flow.py", &["--expect", &seeded.expectations()]).await;
    assert!(stdout.contains("listings flow: 7 passed, 0 failed"), "{stdout}");
}

/// Event subscriptions through the same SDK: subscribe with its own `queues.subscriptions`, and read a
/// dead-lettered event with its pull from the queue subscribed into (tests/sdk/events_flow.py).
#[sqlx::test]
async fn the_official_python_sdk_subscribes_to_events_and_pulls_them(pool: PgPool) {
    let app = spawn_app(pool).await;
    let stdout = run_sdk_script(&app, "events_flow.py", &[]).await;
    assert!(stdout.contains("events flow: 5 passed, 0 failed"), "{stdout}");
}
