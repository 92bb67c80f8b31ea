//! Topics: bindings by routing-key pattern and filter, a publish stored once in every queue its key
//! reaches (all or none), the dry run, and another account's topics and queues out of reach.

use serde_json::{json, Value};
use skiplock::auth::Scope;
use skiplock::engine::limits::Limits;
use sqlx::PgPool;

use crate::helpers::{new_account, spawn_app, spawn_app_with, TestApp};

async fn topic(app: &TestApp, name: &str) -> String {
    app.post("topics", json!({ "name": name })).await.expect_ok()["id"].as_str().unwrap().to_owned()
}

async fn bind(app: &TestApp, topic: &str, queue: &str, pattern: &str) -> Value {
    let body = json!({"queue_id": queue, "pattern": pattern});
    app.post(&format!("topics/{topic}/bindings"), body).await.expect_ok().clone()
}

/// The names of the queues an answer says were reached, in its order.
fn reached(answer: &Value) -> Vec<&str> {
    answer["reached"].as_array().unwrap().iter().map(|q| q["queue_name"].as_str().unwrap()).collect()
}

/// The text bodies a pull of `queue` gets.
async fn bodies(app: &TestApp, queue: &str) -> Vec<String> {
    let pulled = app.pull(queue, json!({"batch_size": 100})).await;
    let mut texts: Vec<String> = pulled.iter().map(|m| m["body"].as_str().unwrap().to_owned()).collect();
    texts.sort();
    texts
}

#[sqlx::test]
async fn a_topic_is_created_bound_listed_and_deleted(pool: PgPool) {
    let app = spawn_app(pool).await;
    let eu = app.create_queue("orders-eu").await;
    let all = app.create_queue("orders-all").await;
    let id = topic(&app, "orders").await;
    assert_eq!(id.len(), 32);
    let taken = app.post("topics", json!({"name": "orders"})).await;
    assert!(taken.expect_error(409).contains("orders"));
    topic(&app, "billing").await;

    let first = bind(&app, &id, &eu, "orders.eu.*").await;
    assert_eq!((first["queue_id"].as_str(), first["queue_name"].as_str()), (Some(eu.as_str()), Some("orders-eu")));
    assert_eq!((first["pattern"].as_str(), first["topic_id"].as_str()), (Some("orders.eu.*"), Some(id.as_str())));
    assert!(first["filter"].is_null());
    let filtered = json!({"queue_id": all, "pattern": "orders.#", "filter": {"tier": "gold"}});
    let second = app.post(&format!("topics/{id}/bindings"), filtered.clone()).await;
    assert_eq!(second.expect_ok()["filter"], json!({"tier": ["gold"]}), "a value is answered as a list");
    let again = app.post(&format!("topics/{id}/bindings"), filtered).await;
    assert!(again.expect_error(409).contains("orders.#"));

    let listed = app.get("topics").await;
    let names: Vec<&str> = listed.expect_ok().as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["billing", "orders"]);
    assert_eq!(listed.body["result_info"]["total_count"], 2);
    assert_eq!(listed.result()[1]["binding_count"], 2);
    let one = app.get(&format!("topics/{id}")).await;
    let patterns: Vec<&str> =
        one.expect_ok()["bindings"].as_array().unwrap().iter().map(|b| b["pattern"].as_str().unwrap()).collect();
    assert_eq!(patterns, ["orders.#", "orders.eu.*"], "by queue name");
    assert_eq!(app.get(&format!("topics/{id}/bindings")).await.expect_ok().as_array().unwrap().len(), 2);

    let binding = first["id"].as_str().unwrap();
    let gone = app.delete(&format!("topics/{id}/bindings/{binding}")).await;
    assert_eq!(gone.expect_ok()["pattern"], "orders.eu.*");
    app.delete(&format!("topics/{id}/bindings/{binding}")).await.expect_error(404);
    // Deleting a queue removes its bindings.
    app.delete(&format!("queues/{all}")).await.expect_ok();
    assert_eq!(app.get(&format!("topics/{id}")).await.expect_ok()["binding_count"], 0);

    let deleted = app.delete(&format!("topics/{id}")).await;
    assert_eq!(deleted.expect_ok()["name"], "orders");
    app.get(&format!("topics/{id}")).await.expect_error(404);
    app.post(&format!("topics/{id}/route"), json!({"routing_key": "a"})).await.expect_error(404);
    let audited = app.get("audit_logs").await;
    let actions: Vec<&str> =
        audited.expect_ok().as_array().unwrap().iter().filter_map(|e| e["action"]["type"].as_str()).collect();
    for action in ["topic.create", "topic_binding.create", "topic_binding.delete", "topic.delete"] {
        assert!(actions.contains(&action), "{action} in {actions:?}");
    }
}

#[sqlx::test]
async fn a_publish_stores_one_copy_in_every_queue_its_key_reaches(pool: PgPool) {
    let app = spawn_app(pool).await;
    let created = app.pull_queue("created", json!({})).await;
    let everything = app.pull_queue("everything", json!({})).await;
    let billing = app.pull_queue("billing", json!({})).await;
    let id = topic(&app, "orders").await;
    bind(&app, &id, &created, "orders.*.created").await;
    bind(&app, &id, &everything, "orders.#").await;
    // A second binding of the same queue does not give it a second copy.
    bind(&app, &id, &everything, "#.created").await;
    bind(&app, &id, &billing, "billing.#").await;

    let key = json!({"routing_key": "orders.eu.created"});
    let route = app.post(&format!("topics/{id}/route"), key.clone()).await;
    assert_eq!(reached(route.expect_ok()), ["created", "everything"]);
    assert_eq!(route.result()["queues"], 2);
    assert_eq!(app.backlog(&created).await, 0, "a dry run stores nothing");

    let messages = json!([{"body": "a", "content_type": "text"}, {"body": "b", "content_type": "text"}]);
    let published = app
        .post(&format!("topics/{id}/messages"), json!({"routing_key": "orders.eu.created", "messages": messages}))
        .await;
    assert_eq!(reached(published.expect_ok()), ["created", "everything"]);
    assert_eq!(
        (published.result()["queues"].as_i64(), published.result()["routing_key"].as_str()),
        (Some(2), Some("orders.eu.created"))
    );
    assert!(published.result()["reached"][0].get("duplicates").is_none(), "only for publishers that use keys");
    assert_eq!(bodies(&app, &created).await, ["a", "b"]);
    assert_eq!(bodies(&app, &everything).await, ["a", "b"]);
    assert_eq!(app.backlog(&billing).await, 0);

    let short = json!({"routing_key": "orders", "messages": [{"body": "c", "content_type": "text"}]});
    let published = app.post(&format!("topics/{id}/messages"), short).await;
    assert_eq!(reached(published.expect_ok()), ["everything"], "# takes zero words");

    let nowhere = json!({"routing_key": "shipping.eu", "messages": [{"body": "d"}]});
    let published = app.post(&format!("topics/{id}/messages"), nowhere).await;
    assert_eq!((published.expect_ok()["queues"].as_i64(), reached(published.result()).len()), (Some(0), 0));
}

#[sqlx::test]
async fn a_filter_reaches_its_queue_only_with_the_attributes_it_names(pool: PgPool) {
    let app = spawn_app(pool).await;
    let gold = app.pull_queue("gold", json!({})).await;
    let id = topic(&app, "orders").await;
    let body = json!({"queue_id": gold, "pattern": "#", "filter": {"tier": ["gold", "platinum"], "region": "eu"}});
    app.post(&format!("topics/{id}/bindings"), body).await.expect_ok();
    let route = |attributes: Value| {
        let app = &app;
        let id = &id;
        async move {
            let body = json!({"routing_key": "orders.new", "attributes": attributes});
            app.post(&format!("topics/{id}/route"), body).await.expect_ok()["queues"].as_i64().unwrap()
        }
    };
    assert_eq!(route(json!({"tier": "platinum", "region": "eu", "other": "x"})).await, 1);
    assert_eq!(route(json!({"tier": "silver", "region": "eu"})).await, 0);
    assert_eq!(route(json!({"tier": "gold"})).await, 0, "every attribute the filter names");
    assert_eq!(route(json!({})).await, 0);
    let publish = json!({"routing_key": "orders.new", "attributes": {"tier": "gold", "region": "eu"},
                         "messages": [{"body": "vip", "content_type": "text"}]});
    app.post(&format!("topics/{id}/messages"), publish).await.expect_ok();
    assert_eq!(bodies(&app, &gold).await, ["vip"]);
}

#[sqlx::test]
async fn idempotency_keys_hold_per_queue(pool: PgPool) {
    let app = spawn_app(pool).await;
    let a = app.pull_queue("a", json!({})).await;
    let b = app.pull_queue("b", json!({})).await;
    let id = topic(&app, "orders").await;
    bind(&app, &id, &a, "#").await;
    // Queue b already holds the key.
    app.publish(&b, json!({"body": "first", "content_type": "text", "idempotency_key": "k1"})).await;
    bind(&app, &id, &b, "#").await;
    let publish =
        json!({"routing_key": "x", "messages": [{"body": "again", "content_type": "text", "idempotency_key": "k1"}]});
    let answer = app.post(&format!("topics/{id}/messages"), publish).await;
    let duplicates: Vec<i64> =
        answer.expect_ok()["reached"].as_array().unwrap().iter().map(|q| q["duplicates"].as_i64().unwrap()).collect();
    assert_eq!(duplicates, [0, 1]);
    assert_eq!(bodies(&app, &a).await, ["again"]);
    assert_eq!(bodies(&app, &b).await, ["first"]);
}

#[sqlx::test]
async fn a_publish_one_queue_refuses_stores_in_none(pool: PgPool) {
    let limits = Limits { max_backlog_bytes_per_queue: 100, ..Limits::default() };
    let app = spawn_app_with(pool, limits).await;
    let roomy = app.pull_queue("roomy", json!({})).await;
    let full = app.pull_queue("full", json!({})).await;
    app.publish(&full, json!({"body": "x".repeat(90), "content_type": "text"})).await;
    let id = topic(&app, "orders").await;
    bind(&app, &id, &roomy, "#").await;
    bind(&app, &id, &full, "#").await;
    let publish = json!({"routing_key": "x", "messages": [{"body": "y".repeat(20), "content_type": "text"}]});
    let refused = app.post(&format!("topics/{id}/messages"), publish).await;
    assert!(refused.expect_error(429).contains("full"));
    assert_eq!(app.backlog(&roomy).await, 0, "nothing stored where there was room");
    assert_eq!(app.backlog(&full).await, 1);
}

#[sqlx::test]
async fn bad_input_names_what_to_fix(pool: PgPool) {
    let app = spawn_app(pool).await;
    let queue = app.create_queue("q").await;
    let id = topic(&app, "orders").await;
    for (name, says) in [(json!("Orders"), "name must be"), (json!(""), "name must be")] {
        assert!(app.post("topics", json!({ "name": name })).await.expect_error(400).contains(says));
    }
    assert!(app.post("topics", json!({})).await.expect_error(400).contains("name is required"));
    let bindings = format!("topics/{id}/bindings");
    for (body, says) in [
        (json!({"pattern": "#"}), "queue_id is required"),
        (json!({"queue_id": queue}), "pattern is required"),
        (json!({"queue_id": queue, "pattern": "a..b"}), "pattern must be"),
        (json!({"queue_id": "nope", "pattern": "#"}), "queue_id must be"),
        (json!({"queue_id": queue, "pattern": "#", "filter": {"tier": []}}), "filter.tier"),
        (json!({"queue_id": queue, "pattern": "#", "filter": ["tier"]}), "filter must be a JSON object"),
        (json!({"queue_id": queue, "pattern": "#", "priority": 1}), "priority"),
    ] {
        let message = app.post(&bindings, body.clone()).await.expect_error(400);
        assert!(message.contains(says), "{body}: {message}");
    }
    let publish = format!("topics/{id}/messages");
    let one = json!([{"body": 1}]);
    for (body, says) in [
        (json!({"messages": one}), "routing_key is required"),
        (json!({"routing_key": "a b", "messages": one}), "routing_key must be"),
        (json!({"routing_key": "a.*", "messages": one}), "routing_key must be"),
        (json!({"routing_key": "a"}), "messages is required"),
        (json!({"routing_key": "a", "messages": []}), "at least one"),
        (json!({"routing_key": "a", "messages": one, "attributes": {"tier": 1}}), "attributes.tier"),
        (json!({"routing_key": "a", "messages": [{"body": 1, "delay_second": 1}]}), "delay_second"),
    ] {
        let message = app.post(&publish, body.clone()).await.expect_error(400);
        assert!(message.contains(says), "{body}: {message}");
    }
    let unknown = "0123456789abcdef0123456789abcdef";
    app.post(&format!("topics/{unknown}/bindings"), json!({"queue_id": queue, "pattern": "#"})).await.expect_error(404);
    app.post(&bindings, json!({"queue_id": unknown, "pattern": "#"})).await.expect_error(404);
    app.get("topics/not-an-id").await.expect_error(400);
}

#[sqlx::test]
async fn another_accounts_queue_cannot_be_bound_and_its_topic_cannot_be_published_to(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let victim_queue = app.pull_queue("victim", json!({})).await;
    let victim_topic = topic(&app, "victim").await;
    let (mallory, token) = new_account(&pool, "mallory", &Scope::ALL).await;
    let theirs = crate::helpers::TestApp::remote(pool, app.address.clone(), mallory, token);
    let own = topic(&theirs, "mine").await;
    let stolen =
        theirs.post(&format!("topics/{own}/bindings"), json!({"queue_id": victim_queue, "pattern": "#"})).await;
    stolen.expect_error(404);
    let publish = json!({"routing_key": "a", "messages": [{"body": 1}]});
    theirs.post(&format!("topics/{victim_topic}/messages"), publish).await.expect_error(404);
    assert_eq!(app.backlog(&victim_queue).await, 0);
    let listed = theirs.get("topics").await;
    assert_eq!(listed.expect_ok().as_array().unwrap().len(), 1);
    assert_eq!(listed.result()[0]["id"], own.as_str());
}
