use std::path::Path;

use sqlx::PgPool;

use crate::helpers::{spawn_app, TestApp};

/// Runs `script` (under tests/sdk/) with the venv's Python against `app`; returns its stdout, having
/// asserted that it succeeded.
async fn run_sdk_script(app: &TestApp, script: &str) -> String {
    let root = env!("CARGO_MANIFEST_DIR");
    let python = Path::new(root).join(".venv/bin/python");
    assert!(python.exists(), "{} is missing: `make test` creates it (make venv)", python.display());
    let output = tokio::process::Command::new(python)
        .arg(Path::new(root).join("tests/sdk").join(script))
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
    let stdout = run_sdk_script(&app, "cloudflare_sdk_flow.py").await;
    assert!(stdout.contains("17 passed, 0 failed"), "{stdout}");
}

/// The same SDK reaches long polling and lease extension through its raw-request escape hatch: a
/// waiting pull gets the message published meanwhile, and heartbeats keep it from a second pull.
#[sqlx::test]
async fn the_official_python_sdk_long_polls_and_extends_leases_through_its_escape_hatch(pool: PgPool) {
    let app = spawn_app(pool).await;
    let stdout = run_sdk_script(&app, "long_poll_extend.py").await;
    assert!(stdout.contains("4 passed, 0 failed"), "{stdout}");
}
