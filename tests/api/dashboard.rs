use sqlx::PgPool;

use crate::helpers::spawn_app_dispatching;

/// The dashboard, end to end in headless Chromium (tests/e2e/dashboard.test.mjs, driven by Playwright):
/// sign in with a token alone, create a queue, send, watch the backlog, peek, purge, tokens, sign out;
/// an account id typed that is not the token's; a wrong token; a missing scope; an unreachable server;
/// the audit log (tests/e2e/audit.test.mjs), a webhook consumer's attempt log, health and test send
/// (tests/e2e/attempts.test.mjs; the node dispatches), and the operator view on the admin address
/// (tests/e2e/operator.test.mjs, plans.test.mjs, deletion.test.mjs), and event subscriptions created,
/// disabled and deleted (tests/e2e/events.test.mjs), a topic bound, tried, published to and deleted
/// (tests/e2e/topics.test.mjs), and the usage page with its quotas (tests/e2e/usage.test.mjs).
/// Screenshots land in tests/e2e/artifacts/.
#[sqlx::test]
async fn the_dashboard_works_end_to_end_in_a_real_browser(pool: PgPool) {
    let app = spawn_app_dispatching(pool.clone()).await;
    let operator = crate::helpers::operator_token(&pool, &skiplock::auth::OperatorScope::ALL).await;
    let root = env!("CARGO_MANIFEST_DIR");
    let output = tokio::process::Command::new("node")
        .current_dir(root)
        .args(["--test", "--test-concurrency=1", "tests/e2e/"])
        .env("SKIPLOCK_URL", &app.address)
        .env("SKIPLOCK_TOKEN", &app.token)
        .env("SKIPLOCK_ACCOUNT", app.account.to_string())
        .env("SKIPLOCK_ADMIN_URL", &app.admin_address)
        .env("SKIPLOCK_OPERATOR_TOKEN", operator)
        .output()
        .await
        .expect("node runs (make test installs the e2e dependencies with tests/e2e/setup.sh)");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "the dashboard's browser test failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("# fail 0"), "{stdout}");
}
