use serde_json::{json, Value};
use sqlx::PgPool;

use crate::helpers::new_account;
use crate::process::{database_url, free_port, Server};
use skiplock::auth::Scope;

/// A 2xx on publish means the message is committed: killing the server right after loses nothing.
#[sqlx::test]
async fn a_published_message_survives_a_killed_server(pool: PgPool) {
    let (account, token) = new_account(&pool, "durable", &Scope::ALL).await;
    let url = database_url(&pool);
    let port = free_port();
    let client = reqwest::Client::new();
    let server = Server::start(&url, port).await;
    let base = format!("{}/client/v4/accounts/{account}", server.address);
    let post = |path: String, body: Value| {
        let client = client.clone();
        let token = token.clone();
        async move {
            let resp = client.post(path).bearer_auth(token).json(&body).send().await.unwrap();
            assert!(resp.status().is_success(), "{}", resp.status());
            resp.json::<Value>().await.unwrap()["result"].clone()
        }
    };
    let queue = post(format!("{base}/queues"), json!({"queue_name": "durable"})).await;
    let q = queue["queue_id"].as_str().unwrap().to_owned();
    post(format!("{base}/queues/{q}/consumers"), json!({"type": "http_pull"})).await;
    let messages: Vec<Value> = (0..50).map(|i| json!({"body": format!("m{i}"), "content_type": "text"})).collect();
    post(format!("{base}/queues/{q}/messages/batch"), json!({ "messages": messages })).await;
    post(format!("{base}/queues/{q}/messages"), json!({"body": "last", "content_type": "text"})).await;
    server.kill().await;

    let server = Server::start(&url, port).await;
    let base = format!("{}/client/v4/accounts/{account}", server.address);
    let pulled = post(format!("{base}/queues/{q}/messages/pull"), json!({"batch_size": 100})).await;
    let bodies: Vec<&str> =
        pulled["messages"].as_array().unwrap().iter().map(|m| m["body"].as_str().unwrap()).collect();
    assert_eq!(bodies.len(), 51);
    assert!(bodies.contains(&"m0") && bodies.contains(&"m49") && bodies.contains(&"last"));
    server.kill().await;
}
