//! What the newest Cloudflare clients call besides the queue endpoints: who a token is, routing
//! codes, `jurisdiction`, event subscriptions and the purge status of a queue never purged.

use reqwest::Method;
use serde_json::json;
use sqlx::PgPool;

use crate::helpers::spawn_app;

#[sqlx::test]
async fn a_token_alone_finds_its_account_through_memberships_and_accounts(pool: PgPool) {
    let app = spawn_app(pool).await;
    let account = app.account.to_string();
    let base = format!("{}/client/v4", app.address);

    let resp = app.raw(Method::GET, &format!("{base}/memberships"), Some(&app.token), None).await;
    let memberships = resp.expect_ok().as_array().unwrap().clone();
    assert_eq!(memberships.len(), 1, "{}", resp.body);
    assert_eq!(memberships[0]["account"]["id"], account);
    assert_eq!(memberships[0]["status"], "accepted");
    assert!(memberships[0]["account"]["name"].as_str().is_some_and(|n| !n.is_empty()));
    assert_eq!(resp.body["result_info"]["total_count"], 1);

    let resp = app.raw(Method::GET, &format!("{base}/accounts"), Some(&app.token), None).await;
    let accounts = resp.expect_ok().as_array().unwrap().clone();
    assert_eq!(accounts.len(), 1);
    assert_eq!(accounts[0]["id"], account);
    assert_eq!(accounts[0]["type"], "standard");

    let resp = app.raw(Method::GET, &format!("{base}/accounts/{account}"), Some(&app.token), None).await;
    assert_eq!(resp.expect_ok()["id"], account);

    for path in ["memberships", "accounts"] {
        let resp = app.raw(Method::GET, &format!("{base}/{path}"), None, None).await;
        resp.expect_error(401);
    }
}

#[sqlx::test]
async fn the_user_endpoint_answers_an_account_token_as_cloudflare_does(pool: PgPool) {
    let app = spawn_app(pool).await;
    let resp = app.raw(Method::GET, &format!("{}/client/v4/user", app.address), Some(&app.token), None).await;
    resp.expect_error(403);
    assert_eq!(resp.error_code(), 9109, "wrangler's whoami expects 9109: {}", resp.body);
}

#[sqlx::test]
async fn unknown_routes_and_malformed_identifiers_get_routing_codes_not_an_authentication_code(pool: PgPool) {
    let app = spawn_app(pool).await;
    let base = format!("{}/client/v4", app.address);
    for url in [format!("{base}/nowhere"), app.url("nowhere"), app.url("queues/0123/nothing/here")] {
        let resp = app.raw(Method::GET, &url, Some(&app.token), None).await;
        resp.expect_error(404);
        assert_eq!(resp.error_code(), 7000, "{url}: {}", resp.body);
    }
    let resp = app.raw(Method::GET, &format!("{base}/accounts/not-an-id/queues"), Some(&app.token), None).await;
    let message = resp.expect_error(404);
    assert_eq!(resp.error_code(), 7003, "{message}");
    assert!(message.contains("perhaps your object identifier is invalid"), "{message}");
    let q = app.pull_queue("orders", json!({})).await;
    let resp = app.get(&format!("queues/{q}/consumers/not-an-id")).await;
    resp.expect_error(400);
    assert_eq!(resp.error_code(), 7003);
}

#[sqlx::test]
async fn jurisdiction_is_kept_from_creation_and_shown_in_every_queue_object(pool: PgPool) {
    let app = spawn_app(pool).await;
    let created = app.post("queues", json!({"queue_name": "eu-orders", "jurisdiction": "eu"})).await;
    let queue = created.expect_ok().clone();
    assert_eq!(queue["jurisdiction"], "eu");
    let id = queue["queue_id"].as_str().unwrap().to_owned();
    assert_eq!(app.get(&format!("queues/{id}")).await.expect_ok()["jurisdiction"], "eu");
    assert_eq!(app.get("queues").await.expect_ok()[0]["jurisdiction"], "eu");

    // A queue created without one shows none, as on Cloudflare.
    let plain = app.post("queues", json!({"queue_name": "plain"})).await.expect_ok().clone();
    assert!(plain.get("jurisdiction").is_none(), "{plain}");

    let message = app.post("queues", json!({"queue_name": "x", "jurisdiction": "mars"})).await.expect_error(400);
    assert!(message.contains("eu, us, fedramp"), "{message}");
    let message = app.patch(&format!("queues/{id}"), json!({"jurisdiction": "us"})).await.expect_error(400);
    assert!(message.contains("cannot change"), "{message}");

    // A Queue object sent back as read is accepted; its read-only fields are ignored.
    let mut edited = queue.clone();
    edited["settings"]["delivery_delay"] = json!(5);
    let replaced = app.put(&format!("queues/{id}"), edited).await;
    assert_eq!(replaced.expect_ok()["settings"]["delivery_delay"], 5);
    assert_eq!(replaced.expect_ok()["jurisdiction"], "eu");

    // A misspelt setting is still refused by name rather than silently ignored.
    let message =
        app.patch(&format!("queues/{id}"), json!({"settings": {"delivery_dealy": 5}})).await.expect_error(400);
    assert!(message.contains("delivery_dealy"), "{message}");
    let message = app.post("queues", json!({"queue_name": "y", "colour": "red"})).await.expect_error(400);
    assert!(message.contains("colour"), "{message}");
}

#[sqlx::test]
async fn the_purge_status_of_a_queue_never_purged_leaves_started_at_out(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.pull_queue("orders", json!({})).await;
    let status = app.get(&format!("queues/{q}/purge")).await.expect_ok().clone();
    assert!(status.get("started_at").is_none(), "Cloudflare's schema types it a string: {status}");
    assert_eq!(status["completed"], "true");
    app.post(&format!("queues/{q}/purge"), json!({"delete_messages_permanently": true})).await.expect_ok();
    let status = app.get(&format!("queues/{q}/purge")).await.expect_ok().clone();
    assert!(status["started_at"].is_string(), "{status}");
}

#[sqlx::test]
async fn event_subscriptions_list_empty_and_refuse_creation_naming_the_supported_sources(pool: PgPool) {
    let app = spawn_app(pool).await;
    let path = "event_subscriptions/subscriptions";
    let resp = app.get(path).await;
    assert_eq!(resp.expect_ok(), &json!([]));
    assert_eq!(resp.body["result_info"]["total_count"], 0);
    let body = json!({"name": "s", "enabled": true, "source": {"type": "r2"}, "destination": {"type": "queues.queue"}, "events": ["x"]});
    let message = app.post(path, body).await.expect_error(400);
    assert!(message.contains("supported sources: none"), "{message}");
    app.get(&format!("{path}/{}", "0".repeat(32))).await.expect_error(404);
}
