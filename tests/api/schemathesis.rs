use sqlx::PgPool;

use crate::helpers::spawn_app;

/// Schemathesis generates requests from the published OpenAPI document, valid and invalid, and checks
/// every answer: no server error, statuses and bodies as documented, unsupported methods refused.
#[sqlx::test]
async fn the_api_holds_to_its_openapi_document_under_generated_input(pool: PgPool) {
    let app = spawn_app(pool).await;
    let root = env!("CARGO_MANIFEST_DIR");
    let output = tokio::process::Command::new(format!("{root}/.venv/bin/schemathesis"))
        .current_dir(root)
        .args(["--config-file", "tests/schemathesis/schemathesis.toml", "run"])
        .arg(format!("{}/openapi.json", app.address))
        .args(["--url", &app.address])
        .env("SKIPLOCK_ACCOUNT_ID", app.account.to_string())
        .env("SKIPLOCK_TOKEN", &app.token)
        .env("NO_COLOR", "1")
        .output()
        .await
        .expect("schemathesis is installed in .venv by `make test`");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "schemathesis found failures:\n{stdout}\n{stderr}");
}
