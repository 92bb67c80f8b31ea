use reqwest::Method;
use serde_json::json;
use skiplock::auth::Scope;
use sqlx::PgPool;

use crate::helpers::{lease, new_account, spawn_app};

/// Another account's objects are 404s, whatever the route, and nothing of theirs changes.
#[sqlx::test]
async fn another_accounts_objects_are_not_found(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let theirs = app.pull_queue("theirs", json!({})).await;
    app.publish_texts(&theirs, &["secret"]).await;
    let their_consumer =
        app.get(&format!("queues/{theirs}/consumers")).await.expect_ok()[0]["consumer_id"].as_str().unwrap().to_owned();
    let leased = app.pull(&theirs, json!({"visibility_timeout_ms": 600_000})).await;
    let their_lease = lease(&leased[0]).to_owned();

    let (mallory, token) = new_account(&pool, "mallory", &Scope::ALL).await;
    let mine = format!("{}/client/v4/accounts/{mallory}", app.address);
    let theirs_url = format!("{}/client/v4/accounts/{}", app.address, app.account);

    // Mallory's token on the victim's account path.
    for (method, path) in [
        (Method::GET, "queues".to_owned()),
        (Method::GET, format!("queues/{theirs}")),
        (Method::POST, "queues".to_owned()),
        (Method::POST, format!("queues/{theirs}/messages/pull")),
        (Method::GET, "tokens".to_owned()),
    ] {
        let resp = app.raw(method.clone(), &format!("{theirs_url}/{path}"), Some(&token), Some(b"{}".to_vec())).await;
        resp.expect_error(404);
    }
    // The victim's ids under Mallory's own account.
    let body = |v: serde_json::Value| Some(v.to_string().into_bytes());
    for (method, path, payload) in [
        (Method::GET, format!("queues/{theirs}"), None),
        (Method::PUT, format!("queues/{theirs}"), body(json!({"queue_name": "stolen"}))),
        (Method::PATCH, format!("queues/{theirs}"), body(json!({"settings": {"delivery_paused": true}}))),
        (Method::DELETE, format!("queues/{theirs}"), None),
        (Method::GET, format!("queues/{theirs}/metrics"), None),
        (Method::POST, format!("queues/{theirs}/purge"), body(json!({"delete_messages_permanently": true}))),
        (Method::GET, format!("queues/{theirs}/purge"), None),
        (Method::GET, format!("queues/{theirs}/consumers"), None),
        (Method::POST, format!("queues/{theirs}/consumers"), body(json!({"type": "http_pull"}))),
        (Method::GET, format!("queues/{theirs}/consumers/{their_consumer}"), None),
        (Method::DELETE, format!("queues/{theirs}/consumers/{their_consumer}"), None),
        (Method::POST, format!("queues/{theirs}/messages"), body(json!({"body": 1}))),
        (Method::POST, format!("queues/{theirs}/messages/batch"), body(json!({"messages": [{"body": 1}]}))),
        (Method::POST, format!("queues/{theirs}/messages/pull"), body(json!({}))),
        (Method::POST, format!("queues/{theirs}/messages/ack"), body(json!({"acks": [{"lease_id": their_lease}]}))),
        (Method::POST, format!("queues/{theirs}/messages/peek"), body(json!({}))),
        (Method::POST, format!("queues/{theirs}/messages/purge"), body(json!({"refs": []}))),
    ] {
        let resp = app.raw(method.clone(), &format!("{mine}/{path}"), Some(&token), payload).await;
        resp.expect_error(404);
    }
    // The victim's consumer and lease ids against Mallory's own queue.
    let own_resp =
        app.raw(Method::POST, &format!("{mine}/queues"), Some(&token), body(json!({"queue_name": "own"}))).await;
    let own = own_resp.expect_ok()["queue_id"].as_str().unwrap().to_owned();
    let resp =
        app.raw(Method::GET, &format!("{mine}/queues/{own}/consumers/{their_consumer}"), Some(&token), None).await;
    resp.expect_error(404);
    let ack = body(json!({"acks": [{"lease_id": their_lease}], "retries": [{"lease_id": their_lease}]}));
    let resp = app.raw(Method::POST, &format!("{mine}/queues/{own}/messages/ack"), Some(&token), ack).await;
    assert_eq!(resp.expect_ok()["ackCount"], 0);
    assert!(resp.result()["warnings"].get(&their_lease).is_some());

    // Nothing of the victim's changed.
    let queue = app.get(&format!("queues/{theirs}")).await;
    assert_eq!(queue.expect_ok()["queue_name"], "theirs");
    assert_eq!(queue.result()["settings"]["delivery_paused"], false);
    assert_eq!(queue.result()["consumers_total_count"], 1);
    assert_eq!(app.backlog(&theirs).await, 1);
    assert_eq!(app.ack(&theirs, &[&their_lease], json!([])).await["ackCount"], 1);
}
