//! The audit log: every change to an account's configuration is recorded with who made it, from where and
//! in which request, and what it changed; the account reads its own in Cloudflare's shape and filters,
//! the operator reads every account's; messages are not audited; old entries are pruned.

use reqwest::Method;
use serde_json::{json, Value};
use skiplock::auth::OperatorScope;
use sqlx::PgPool;

use crate::helpers::{new_account, spawn_app, TestApp};
use crate::operator::Operator;

async fn entries(app: &TestApp, query: &str) -> Vec<Value> {
    let page = app.get(&format!("audit_logs{query}")).await;
    page.expect_ok().as_array().unwrap().clone()
}

fn actions(entries: &[Value]) -> Vec<&str> {
    entries.iter().map(|e| e["action"]["type"].as_str().unwrap()).collect()
}

#[sqlx::test]
async fn every_change_to_an_account_is_recorded_with_who_where_and_what(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let token_id = app.get("tokens").await.expect_ok()[0]["id"].as_str().unwrap().to_owned();
    let q = app.create_queue("orders").await;
    let patched =
        app.call(Method::PATCH, &format!("queues/{q}"), Some(json!({"settings": {"delivery_delay": 5}}))).await;
    patched.expect_ok();
    let consumer = app.post(&format!("queues/{q}/consumers"), json!({"type": "http_pull"})).await;
    let consumer = consumer.expect_ok()["consumer_id"].as_str().unwrap().to_owned();
    app.delete(&format!("queues/{q}/consumers/{consumer}")).await.expect_ok();
    let made = app.post("tokens", json!({"name": "ci", "scopes": ["queues_read"]})).await;
    let made_id = made.expect_ok()["id"].as_str().unwrap().to_owned();
    let secret = made.result()["token"].as_str().unwrap().to_owned();
    app.delete(&format!("tokens/{made_id}")).await.expect_ok();
    // The message path is not audited.
    app.publish_texts(&q, &["one", "two"]).await;
    app.post(&format!("queues/{q}/messages/purge"), json!({"refs": []})).await;
    app.post(&format!("queues/{q}/purge"), json!({"delete_messages_permanently": true})).await.expect_ok();
    app.delete(&format!("queues/{q}")).await.expect_ok();

    let all = entries(&app, "").await;
    assert_eq!(
        actions(&all),
        [
            "queue.delete",
            "queue.purge",
            "token.revoke",
            "token.create",
            "consumer.delete",
            "consumer.create",
            "queue.update",
            "queue.create"
        ],
        "newest first"
    );
    let update = &all[6];
    assert_eq!(update["resource"], json!({"type": "queue", "id": q}));
    assert_eq!(update["oldValueJson"]["settings"]["delivery_delay"], json!(0));
    assert_eq!(update["newValueJson"]["settings"]["delivery_delay"], json!(5));
    assert_eq!(update["actor"]["type"], json!("token"));
    assert_eq!(update["actor"]["id"], json!(token_id));
    assert_eq!(update["actor"]["ip"], json!("127.0.0.1"));
    assert_eq!(update["owner"]["id"], json!(app.account.to_string()));
    assert_eq!(update["interface"], json!("API"));
    assert_eq!(patched.headers["x-request-id"].to_str().unwrap(), update["metadata"]["request_id"].as_str().unwrap());
    assert!(!all.iter().any(|e| e.to_string().contains(&secret)), "a token's text is never recorded");
    assert_eq!(all[3]["newValueJson"]["name"], json!("ci"));

    // Cloudflare's filters: action.type, since and before, direction, paging.
    assert_eq!(actions(&entries(&app, "?action.type=queue.create").await), ["queue.create"]);
    let first = all.last().unwrap()["when"].as_str().unwrap().to_owned();
    let oldest = entries(&app, "?direction=asc&per_page=2").await;
    assert_eq!(actions(&oldest), ["queue.create", "queue.update"]);
    let page = app.get("audit_logs?per_page=3&page=3").await;
    assert_eq!(page.body["result_info"]["total_count"], json!(8));
    assert_eq!(actions(page.expect_ok().as_array().unwrap()), ["queue.update", "queue.create"]);
    let since = entries(&app, &format!("?since={}", first.replace('+', "%2B"))).await;
    assert_eq!(since.len(), 8);
    assert!(entries(&app, &format!("?before={}", first.replace('+', "%2B"))).await.is_empty());
    for (query, needle) in [
        ("?since=yesterday", "since must be an RFC 3339 time"),
        ("?direction=up", "direction must be asc or desc"),
        ("?colour=red", "unknown query parameter \"colour\""),
        ("?per_page=0", "per_page"),
    ] {
        let message = app.get(&format!("audit_logs{query}")).await.expect_error(400);
        assert!(message.contains(needle), "{query}: {message}");
    }

    // Another account sees none of it, and its own list is its own.
    let (mallory, token) = new_account(&pool, "mallory", &[]).await;
    let theirs = format!("{}/client/v4/accounts/{}/audit_logs", app.address, app.account);
    app.raw(Method::GET, &theirs, Some(&token), None).await.expect_error(404);
    let own = format!("{}/client/v4/accounts/{mallory}/audit_logs", app.address);
    assert_eq!(app.raw(Method::GET, &own, Some(&token), None).await.expect_ok(), &json!([]));
}

#[sqlx::test]
async fn the_operators_changes_are_recorded_and_the_operator_reads_every_accounts(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let operator = Operator::new(&app, &OperatorScope::ALL).await;
    let (acme, _) = operator.create_account("Acme").await;
    operator
        .call(Method::POST, &format!("accounts/{acme}/suspend"), Some(json!({"reason": "unpaid"})))
        .await
        .expect_ok();
    operator.call(Method::POST, &format!("accounts/{acme}/resume"), Some(json!({}))).await.expect_ok();
    operator.call(Method::PATCH, &format!("accounts/{acme}"), Some(json!({"name": "Acme Inc"}))).await.expect_ok();
    app.create_queue("mine").await;

    let page = operator.call(Method::GET, &format!("audit_logs?account_id={acme}"), None).await;
    let acme_entries = page.expect_ok().as_array().unwrap().clone();
    assert_eq!(
        actions(&acme_entries),
        ["account.update", "account.resume", "account.suspend", "token.create", "account.create"]
    );
    assert!(acme_entries.iter().all(|e| e["actor"]["type"] == "operator"));
    assert_eq!(acme_entries[0]["oldValueJson"]["name"], json!("Acme"));
    assert_eq!(acme_entries[0]["newValueJson"]["name"], json!("Acme Inc"));
    assert_eq!(acme_entries[2]["newValueJson"]["reason"], json!("unpaid"));
    let everything = operator.call(Method::GET, "audit_logs", None).await;
    assert_eq!(everything.body["result_info"]["total_count"], json!(6), "Acme's five and the app's queue");
    let message = operator.call(Method::GET, "audit_logs?account_id=nope", None).await.expect_error(400);
    assert!(message.contains("account_id"), "{message}");
    // The account reads the operator's changes to it too.
    let tenant_view = format!("{}/client/v4/accounts/{acme}/audit_logs", app.address);
    let token = operator
        .call(Method::POST, &format!("accounts/{acme}/tokens"), Some(json!({"name": "t", "scopes": ["queues_read"]})))
        .await;
    let text = token.expect_ok()["token"].as_str().unwrap().to_owned();
    let seen = app.raw(Method::GET, &tenant_view, Some(&text), None).await;
    assert_eq!(seen.expect_ok().as_array().unwrap().len(), 6, "with the token just made");
}

#[sqlx::test]
async fn entries_older_than_ninety_days_are_pruned(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    app.create_queue("a").await;
    app.create_queue("b").await;
    sqlx::query("update audit_logs set at = now() - interval '91 days' where new_value->>'queue_name' = 'a'")
        .execute(&pool)
        .await
        .unwrap();
    assert_eq!(skiplock::engine::audit::prune(&pool).await.unwrap(), 1);
    assert_eq!(actions(&entries(&app, "").await), ["queue.create"]);
}
