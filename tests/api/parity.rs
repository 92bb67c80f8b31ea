//! What the newest Cloudflare clients call besides the queue endpoints: who a token is, routing
//! codes, `jurisdiction` (and a dead-letter queue's), event subscriptions and the purge status of a
//! queue never purged.

use reqwest::Method;
use serde_json::{json, Value};
use sqlx::PgPool;

use crate::helpers::{lease, spawn_app, TestApp};

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

/// The queue named `name`, as the account's list shows it.
async fn queue_named(app: &TestApp, name: &str) -> Value {
    let list = app.get(&format!("queues?name={name}")).await;
    list.expect_ok().as_array().unwrap().first().cloned().unwrap_or_else(|| panic!("no queue {name}"))
}

/// Cloudflare keeps a dead-letter queue in its source queue's jurisdiction: one made on demand takes the
/// source's, and one that exists elsewhere is refused naming both jurisdictions, on create and update.
#[sqlx::test]
async fn a_dead_letter_queue_is_in_its_source_queues_jurisdiction(pool: PgPool) {
    let app = spawn_app(pool).await;
    let eu = app.post("queues", json!({"queue_name": "eu-orders", "jurisdiction": "eu"})).await;
    let eu = eu.expect_ok()["queue_id"].as_str().unwrap().to_owned();
    app.post("queues", json!({"queue_name": "us-dlq", "jurisdiction": "us"})).await.expect_ok();
    app.create_queue("plain-dlq").await;

    // Refused on create, both ways, and nothing is made: no consumer.
    for (dead_letter, named) in
        [("us-dlq", ["jurisdiction us", "jurisdiction eu"]), ("plain-dlq", ["no jurisdiction", "jurisdiction eu"])]
    {
        let body = json!({"type": "http_pull", "dead_letter_queue": dead_letter});
        let message = app.post(&format!("queues/{eu}/consumers"), body).await.expect_error(400);
        assert!(named.iter().all(|n| message.contains(n)) && message.contains(dead_letter), "{message}");
    }
    assert_eq!(app.get(&format!("queues/{eu}/consumers")).await.expect_ok(), &json!([]));

    // Made on demand in the source's jurisdiction.
    let body = json!({"type": "http_pull", "dead_letter_queue": "eu-dlq", "settings": {"max_retries": 0}});
    let consumer = app.post(&format!("queues/{eu}/consumers"), body).await.expect_ok()["consumer_id"].clone();
    assert_eq!(queue_named(&app, "eu-dlq").await["jurisdiction"], "eu");

    // Refused on update; the consumer keeps its dead-letter queue.
    let path = format!("queues/{eu}/consumers/{}", consumer.as_str().unwrap());
    let message = app.put(&path, json!({"type": "http_pull", "dead_letter_queue": "us-dlq"})).await.expect_error(400);
    assert!(message.contains("jurisdiction us") && message.contains("jurisdiction eu"), "{message}");
    assert_eq!(app.get(&path).await.expect_ok()["dead_letter_queue"], "eu-dlq");

    // The other way: a queue without a jurisdiction refuses a dead-letter queue with one, and makes its
    // missing one without.
    let plain = app.create_queue("plain").await;
    let message = app
        .post(&format!("queues/{plain}/consumers"), json!({"type": "http_pull", "dead_letter_queue": "us-dlq"}))
        .await
        .expect_error(400);
    assert!(message.contains("jurisdiction us") && message.contains("no jurisdiction"), "{message}");
    let body = json!({"type": "http_pull", "dead_letter_queue": "plain-made"});
    app.post(&format!("queues/{plain}/consumers"), body).await.expect_ok();
    assert!(queue_named(&app, "plain-made").await.get("jurisdiction").is_none());

    // A dead-letter queue deleted since is made again when a message needs it, in the source's jurisdiction.
    let dead_letter = queue_named(&app, "eu-dlq").await["queue_id"].as_str().unwrap().to_owned();
    app.delete(&format!("queues/{dead_letter}")).await.expect_ok();
    app.publish_texts(&eu, &["doomed"]).await;
    let got = app.pull(&eu, json!({})).await;
    app.ack(&eu, &[], json!([{"lease_id": lease(&got[0])}])).await;
    let remade = queue_named(&app, "eu-dlq").await;
    assert_eq!(remade["jurisdiction"], "eu", "{remade}");
    assert_eq!(app.backlog(remade["queue_id"].as_str().unwrap()).await, 1);
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

/// Cloudflare's product sources (R2, KV, Workflows...) have nothing here to come from: a create naming one
/// is refused with the sources skiplock has.
#[sqlx::test]
async fn an_event_subscription_to_a_cloudflare_product_names_the_sources_there_are(pool: PgPool) {
    let app = spawn_app(pool).await;
    let path = "event_subscriptions/subscriptions";
    let resp = app.get(path).await;
    assert_eq!(resp.expect_ok(), &json!([]));
    assert_eq!(resp.body["result_info"]["total_count"], 0);
    let body = json!({"name": "s", "enabled": true, "source": {"type": "r2"}, "destination": {"type": "queues.queue"}, "events": ["x"]});
    let message = app.post(path, body).await.expect_error(400);
    assert!(message.contains(r#"the sources are "queues.queue""#), "{message}");
    app.get(&format!("{path}/{}", "0".repeat(32))).await.expect_error(404);
}
