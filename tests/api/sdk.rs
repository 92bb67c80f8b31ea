use std::path::Path;

use sqlx::PgPool;

use crate::helpers::spawn_app;

/// The official Python SDK `cloudflare`, unchanged, drives the whole pull path (tests/sdk/).
#[sqlx::test]
async fn the_official_python_sdk_works_unchanged(pool: PgPool) {
    let app = spawn_app(pool).await;
    let root = env!("CARGO_MANIFEST_DIR");
    let python = Path::new(root).join(".venv/bin/python");
    assert!(python.exists(), "{} is missing: `make test` creates it (make venv)", python.display());
    let output = tokio::process::Command::new(python)
        .arg(Path::new(root).join("tests/sdk/cloudflare_sdk_flow.py"))
        .env("SKIPLOCK_BASE_URL", format!("{}/client/v4", app.address))
        .env("SKIPLOCK_TOKEN", &app.token)
        .env("SKIPLOCK_ACCOUNT", app.account.to_string())
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "the SDK flow failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("16 passed, 0 failed"), "{stdout}");
}
