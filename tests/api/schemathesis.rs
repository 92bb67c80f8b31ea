use sqlx::PgPool;

use crate::helpers::{operator_token, spawn_app, spawn_app_with_args};

/// Schemathesis generates requests from the published OpenAPI document, valid and invalid, and checks
/// every answer: no server error, statuses and bodies as documented, unsupported methods refused.
#[sqlx::test]
async fn the_api_holds_to_its_openapi_document_under_generated_input(pool: PgPool) {
    // A test send to a generated consumer's endpoint answers within the run's request timeout.
    let app = spawn_app_with_args(pool, &["--webhook-timeout-ms=2000"]).await;
    let env = [("SKIPLOCK_ACCOUNT_ID", app.account.to_string()), ("SKIPLOCK_TOKEN", app.token.clone())];
    schemathesis("tests/schemathesis/schemathesis.toml", &app.address, &env).await;
}

/// The same for the operator API, on its own address, with an operator token holding every scope. The run
/// creates accounts, renames, suspends and resumes the test's account, and issues and revokes its tokens.
#[sqlx::test]
async fn the_operator_api_holds_to_its_openapi_document_under_generated_input(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let token = operator_token(&pool, &skiplock::auth::OperatorScope::ALL).await;
    let env = [("SKIPLOCK_ACCOUNT_ID", app.account.to_string()), ("SKIPLOCK_OPERATOR_TOKEN", token)];
    schemathesis("tests/schemathesis/admin.toml", &app.admin_address, &env).await;
}

/// Runs schemathesis with `config` (relative to the repository root) on the document `address` serves at
/// `/openapi.json`, sending its requests to `address` with `env` set, and fails with its report unless
/// every check passed.
async fn schemathesis(config: &str, address: &str, env: &[(&str, String)]) {
    let root = env!("CARGO_MANIFEST_DIR");
    let output = tokio::process::Command::new(format!("{root}/.venv/bin/schemathesis"))
        .current_dir(root)
        .args(["--config-file", config, "run"])
        .arg(format!("{address}/openapi.json"))
        .args(["--url", address])
        .envs(env.iter().map(|(name, value)| (*name, value.as_str())))
        .env("NO_COLOR", "1")
        .output()
        .await
        .expect("schemathesis is installed in .venv by `make test`");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "schemathesis ({config}) found failures:\n{stdout}\n{stderr}");
}
