//! The operator API (`/admin/v1` on the admin address): operator tokens and no others, accounts created,
//! listed, renamed, suspended and resumed, tokens issued on an account's behalf; and what a suspension
//! and a token's validity window do to the tenant API, the long polls and the webhook deliveries.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{json, Value};
use skiplock::auth::OperatorScope;
use sqlx::PgPool;

use crate::helpers::{operator_token, spawn_app, spawn_app_dispatching, wait_until, Resp, TestApp};
use crate::receiver::{Answer, Receiver};

/// The operator's view of the app: requests to the admin address with an operator token.
pub struct Operator<'a> {
    app: &'a TestApp,
    token: String,
}

impl<'a> Operator<'a> {
    pub async fn new(app: &'a TestApp, scopes: &[OperatorScope]) -> Operator<'a> {
        Operator { app, token: operator_token(&app.pool, scopes).await }
    }

    pub async fn call(&self, method: Method, path: &str, body: Option<Value>) -> Resp {
        let url = format!("{}/admin/v1/{path}", self.app.admin_address);
        self.app.raw(method, &url, Some(&self.token), body.map(|b| b.to_string().into_bytes())).await
    }

    /// The text of a GET's answer that is not JSON (a CSV export), which must be a 200.
    pub async fn text(&self, path: &str) -> String {
        let url = format!("{}/admin/v1/{path}", self.app.admin_address);
        let resp = reqwest::Client::new().get(url).bearer_auth(&self.token).send().await.expect("the server answers");
        assert_eq!(resp.status().as_u16(), 200);
        resp.text().await.unwrap()
    }

    pub async fn create_account(&self, name: &str) -> (String, String) {
        let created = self.call(Method::POST, "accounts", Some(json!({"name": name}))).await;
        let result = created.expect_ok();
        (result["account"]["id"].as_str().unwrap().to_owned(), result["token"]["token"].as_str().unwrap().to_owned())
    }
}

#[sqlx::test]
async fn each_api_takes_its_own_tokens_and_a_read_only_operator_cannot_write(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let reader = Operator::new(&app, &[OperatorScope::Read]).await;
    let accounts = format!("{}/admin/v1/accounts", app.admin_address);
    // No token, and an account's token, on the operator API.
    let message = app.raw(Method::GET, &accounts, None, None).await.expect_error(401);
    assert!(message.contains("bearer"), "{message}");
    let message = app.raw(Method::GET, &accounts, Some(&app.token), None).await.expect_error(401);
    assert!(message.contains("operator token"), "{message}");
    // An operator token on the tenant API.
    let message = app.raw(Method::GET, &app.url("queues"), Some(&reader.token), None).await.expect_error(401);
    assert!(message.contains("operator token cannot use the tenant API"), "{message}");
    // The operator API is not served on the tenant address.
    app.raw(Method::GET, &format!("{}/admin/v1/accounts", app.address), Some(&reader.token), None)
        .await
        .expect_error(404);
    // A read-only operator token reads, and is refused every write.
    reader.call(Method::GET, "accounts", None).await.expect_ok();
    let account = app.account.to_string();
    for (method, path, body) in [
        (Method::POST, "accounts".to_owned(), json!({"name": "x"})),
        (Method::PATCH, format!("accounts/{account}"), json!({"name": "x"})),
        (Method::POST, format!("accounts/{account}/suspend"), json!({})),
        (Method::POST, format!("accounts/{account}/resume"), json!({})),
        (Method::POST, format!("accounts/{account}/tokens"), json!({"name": "x", "scopes": ["queues_read"]})),
    ] {
        let message = reader.call(method, &path, Some(body)).await.expect_error(403);
        assert!(message.contains("write scope"), "{path}: {message}");
    }
    // A revoked operator token is refused.
    let id = &reader.token[4..36];
    sqlx::query("update operator_tokens set revoked_at = now() where id = $1::uuid")
        .bind(id)
        .execute(&pool)
        .await
        .unwrap();
    let fresh = skiplock::auth::Verifier::<skiplock::auth::OperatorTokens>::new(pool.clone());
    assert!(fresh.verify(&reader.token).await.unwrap().is_none());
}

#[sqlx::test]
async fn an_operator_creates_finds_renames_and_reads_accounts(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let operator = Operator::new(&app, &OperatorScope::ALL).await;
    let (acme, acme_token) = operator.create_account("Acme Corp").await;
    // The first token works on the tenant API at once, with every scope.
    let verify = format!("{}/client/v4/user/tokens/verify", app.address);
    let verified = app.raw(Method::GET, &verify, Some(&acme_token), None).await;
    assert_eq!(verified.expect_ok()["account_id"], json!(acme));
    let queues = format!("{}/client/v4/accounts/{acme}/queues", app.address);
    let body = Some(json!({"queue_name": "orders"}).to_string().into_bytes());
    app.raw(Method::POST, &queues, Some(&acme_token), body).await.expect_ok();
    operator.create_account("Globex").await;

    // Filtered by name (any case) and status, and paged.
    let found = operator.call(Method::GET, "accounts?name=acme", None).await;
    let names: Vec<&str> = found.expect_ok().as_array().unwrap().iter().map(|a| a["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["Acme Corp"]);
    let all = operator.call(Method::GET, "accounts?status=active&per_page=2&page=2", None).await;
    assert_eq!(all.body["result_info"]["total_count"], json!(3), "tenant-a, Acme and Globex: {}", all.body);
    assert_eq!(all.expect_ok().as_array().unwrap().len(), 1);
    let none = operator.call(Method::GET, "accounts?status=suspended", None).await;
    assert_eq!(none.expect_ok().as_array().unwrap().len(), 0);

    let renamed = operator.call(Method::PATCH, &format!("accounts/{acme}"), Some(json!({"name": "Acme Inc"}))).await;
    assert_eq!(renamed.expect_ok()["name"], json!("Acme Inc"));
    let got = operator.call(Method::GET, &format!("accounts/{acme}"), None).await;
    let got = got.expect_ok();
    assert_eq!((got["name"].as_str(), got["status"].as_str()), (Some("Acme Inc"), Some("active")));

    // Bad input is a 400 naming what to fix; an unknown account a 404.
    for (method, path, body, needle) in [
        (Method::POST, "accounts".to_owned(), json!({"name": " "}), "name is required"),
        (Method::POST, "accounts".to_owned(), json!({"name": "x", "plan": "gold"}), "plan"),
        (Method::GET, "accounts?colour=red".to_owned(), json!({}), "colour"),
        (Method::GET, "accounts?status=gone".to_owned(), json!({}), "active, suspended, deleting or deleted"),
        (Method::GET, "accounts/not-an-id".to_owned(), json!({}), "account id"),
        (Method::POST, format!("accounts/{acme}/suspend"), json!({"reason": "x".repeat(501)}), "500"),
    ] {
        let body = (method != Method::GET).then_some(body);
        let message = operator.call(method, &path, body).await.expect_error(400);
        assert!(message.contains(needle), "{path}: {message}");
    }
    let unknown = "0".repeat(32);
    operator.call(Method::GET, &format!("accounts/{unknown}"), None).await.expect_error(404);
    operator.call(Method::POST, &format!("accounts/{unknown}/suspend"), Some(json!({}))).await.expect_error(404);
    operator.call(Method::GET, &format!("accounts/{unknown}/tokens"), None).await.expect_error(404);
    operator.call(Method::DELETE, "accounts", None).await.expect_error(405);
}

#[sqlx::test]
async fn tokens_issued_on_an_accounts_behalf_are_listed_and_revoked_there_alone(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let operator = Operator::new(&app, &OperatorScope::ALL).await;
    let (other, _) = operator.create_account("Other").await;
    let mine = app.account.to_string();
    let expires = (chrono::Utc::now() + chrono::Duration::days(30)).to_rfc3339();
    let body = json!({"name": "ci", "scopes": ["queues_read"], "expires_on": expires});
    let created = operator.call(Method::POST, &format!("accounts/{mine}/tokens"), Some(body)).await;
    let created = created.expect_ok().clone();
    let (id, text) = (created["id"].as_str().unwrap(), created["token"].as_str().unwrap());
    assert_eq!(created["scopes"], json!(["queues_read"]));
    assert!(created["expires_on"].is_string(), "{created}");
    app.raw(Method::GET, &app.url("queues"), Some(text), None).await.expect_ok();
    let listed = operator.call(Method::GET, &format!("accounts/{mine}/tokens"), None).await;
    assert!(listed.expect_ok().as_array().unwrap().iter().any(|t| t["id"] == json!(id)));
    // Another account's path does not reach the token.
    operator.call(Method::DELETE, &format!("accounts/{other}/tokens/{id}"), None).await.expect_error(404);
    app.raw(Method::GET, &app.url("queues"), Some(text), None).await.expect_ok();
    operator.call(Method::DELETE, &format!("accounts/{mine}/tokens/{id}"), None).await.expect_ok();
    operator.call(Method::DELETE, &format!("accounts/{mine}/tokens/{id}"), None).await.expect_error(404);
}

#[sqlx::test]
async fn a_token_is_refused_outside_its_window_and_says_which_side(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let now = chrono::Utc::now();
    let app = &app;
    let create = |body: Value| async move { app.post("tokens", body).await };
    let past = (now - chrono::Duration::hours(1)).to_rfc3339();
    let message = create(json!({"name": "x", "scopes": ["queues_read"], "expires_on": past})).await.expect_error(400);
    assert!(message.contains("expires_on must be in the future"), "{message}");
    let message = create(json!({"name": "x", "scopes": ["queues_read"], "not_before": "tomorrow"})).await;
    assert!(message.expect_error(400).contains("RFC 3339"));
    let (later, soon) =
        ((now + chrono::Duration::hours(2)).to_rfc3339(), (now + chrono::Duration::hours(1)).to_rfc3339());
    let message = create(json!({"name": "x", "scopes": ["queues_read"], "not_before": later, "expires_on": soon}));
    assert!(message.await.expect_error(400).contains("not_before must be before expires_on"));

    let pending = create(json!({"name": "later", "scopes": ["queues_read"], "not_before": later})).await;
    let pending = pending.expect_ok()["token"].as_str().unwrap().to_owned();
    let resp = app.raw(Method::GET, &app.url("queues"), Some(&pending), None).await;
    assert!(resp.expect_error(401).contains("not valid before"), "{}", resp.body);
    assert_eq!(resp.error_code(), 10001);

    let expiring = (chrono::Utc::now() + chrono::Duration::seconds(2)).to_rfc3339();
    let short = create(json!({"name": "short", "scopes": ["queues_read"], "expires_on": expiring})).await;
    let short = short.expect_ok().clone();
    let text = short["token"].as_str().unwrap().to_owned();
    app.raw(Method::GET, &app.url("queues"), Some(&text), None).await.expect_ok();
    wait_until("the token expires", Duration::from_secs(10), || async {
        app.raw(Method::GET, &app.url("queues"), Some(&text), None).await.status == 401
    })
    .await;
    let resp = app.raw(Method::GET, &app.url("queues"), Some(&text), None).await;
    assert!(resp.expect_error(401).contains("expired at"), "{}", resp.body);
    let listed = app.get("tokens").await;
    let listed = listed.expect_ok().as_array().unwrap().clone();
    let entry = listed.iter().find(|t| t["id"] == short["id"]).expect("an expired token is still listed");
    assert_eq!(entry["status"], json!("expired"));
}

#[sqlx::test]
async fn a_suspended_account_is_refused_on_every_node_its_long_polls_end_and_resuming_serves_it_as_it_was(
    pool: PgPool,
) {
    let app = spawn_app(pool.clone()).await;
    let other_node = app.another_node().await;
    let operator = Operator::new(&app, &OperatorScope::ALL).await;
    let q = app.pull_queue("orders", json!({})).await;
    app.publish_texts(&q, &["a", "b", "c"]).await;
    let empty = app.pull_queue("empty", json!({})).await;
    // A long poll waits on the other node.
    let waiting = {
        let (url, token) = (other_node.url(&format!("queues/{empty}/messages/pull")), other_node.token.clone());
        let client = reqwest::Client::new();
        tokio::spawn(async move {
            let resp = client.post(url).bearer_auth(token).json(&json!({"wait_time_ms": 20_000})).send().await.unwrap();
            let status = resp.status().as_u16();
            (status, resp.json::<Value>().await.unwrap())
        })
    };
    wait_until("the long poll waits", Duration::from_secs(5), || async { other_node.metrics.waiting_pulls.get() == 1 })
        .await;

    let account = app.account.to_string();
    let suspended = Instant::now();
    let body = Some(json!({"reason": "unpaid invoice"}));
    let row = operator.call(Method::POST, &format!("accounts/{account}/suspend"), body).await;
    let row = row.expect_ok();
    assert_eq!((row["status"].as_str(), row["status_reason"].as_str()), (Some("suspended"), Some("unpaid invoice")));
    // Refused at once on the node that suspended it, and within 2 s on the other.
    let resp = app.get("queues").await;
    assert!(resp.expect_error(403).starts_with("account_suspended"), "{}", resp.body);
    assert_eq!(resp.error_code(), 11016);
    wait_until("the other node refuses the account", Duration::from_secs(2), || async {
        other_node.get("queues").await.status == 403
    })
    .await;
    // Ended by the suspension (its node's next reading of the refused accounts), not by its 20 s wait; how
    // soon after is the reading's pace plus a loaded host's scheduling, not something to time here.
    let (status, body) = waiting.await.unwrap();
    assert!(suspended.elapsed() < Duration::from_secs(10), "the long poll ended {:?} after", suspended.elapsed());
    assert_eq!((status, body["errors"][0]["code"].as_i64()), (403, Some(11016)), "{body}");
    // The other account is served as before.
    let (_, theirs) = operator.create_account("neighbour").await;
    let verify = format!("{}/client/v4/user/tokens/verify", other_node.address);
    app.raw(Method::GET, &verify, Some(&theirs), None).await.expect_ok();

    let resumed = operator.call(Method::POST, &format!("accounts/{account}/resume"), None).await;
    assert_eq!(resumed.expect_ok()["status"], json!("active"));
    wait_until("the other node serves the account again", Duration::from_secs(2), || async {
        other_node.get("queues").await.status == 200
    })
    .await;
    // Nothing was deleted.
    let got = app.pull(&q, json!({"batch_size": 10})).await;
    assert_eq!(got.len(), 3);
}

#[sqlx::test]
async fn a_suspended_accounts_webhook_deliveries_stop_on_every_node_and_resume_with_nothing_lost(pool: PgPool) {
    let app = spawn_app_dispatching(pool.clone()).await;
    let _second = app.another_dispatching_node().await;
    let operator = Operator::new(&app, &OperatorScope::ALL).await;
    let receiver = Receiver::start(|_| Answer::status(200)).await;
    let hook =
        app.webhook_queue("hooks", &receiver.url, json!({"settings": {"batch_size": 1, "max_wait_time_ms": 0}})).await;
    // A stream of publishes, delivered as they come.
    let mut published = 0;
    for _ in 0..20 {
        app.publish(&hook.queue, json!({"body": published})).await;
        published += 1;
    }
    receiver.wait_for(published, Duration::from_secs(10)).await;
    // Due 3 s from now: past the suspension below.
    let batch: Vec<Value> = (0..50).map(|i| json!({"body": 1000 + i, "delay_seconds": 3})).collect();
    app.post(&format!("queues/{}/messages/batch", hook.queue), json!({"messages": batch})).await.expect_ok();
    published += 50;
    let account = app.account.to_string();
    operator.call(Method::POST, &format!("accounts/{account}/suspend"), Some(json!({}))).await.expect_ok();
    let at_suspend = receiver.received().len();
    // The delayed messages came due while suspended: no node delivers them.
    wait_until("the delayed messages come due", Duration::from_secs(10), || async {
        let due: i64 = sqlx::query_scalar("select count(*) from messages where available_at <= now()")
            .fetch_one(&pool)
            .await
            .unwrap();
        due == 50
    })
    .await;
    // Two dispatchers' wake-ups and timers have had their chance; none delivers for a suspended account.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(receiver.received().len(), at_suspend, "no delivery while suspended");
    operator.call(Method::POST, &format!("accounts/{account}/resume"), None).await.expect_ok();
    let got = receiver.wait_for(published, Duration::from_secs(15)).await;
    let mut bodies: Vec<i64> = got
        .iter()
        .flat_map(|r| r.body["messages"].as_array().unwrap().clone())
        .map(|m| m["body"].as_i64().unwrap())
        .collect();
    bodies.sort();
    bodies.dedup();
    assert_eq!(bodies.len(), published, "every message delivered after the resume");
}

#[sqlx::test]
async fn a_token_is_refused_from_an_address_its_condition_refuses(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let token = |condition: Value| {
        let app = &app;
        async move {
            let body = json!({"name": "located", "scopes": ["queues_read"], "condition": condition});
            let created = app.post("tokens", body).await;
            created.expect_ok().clone()
        }
    };
    let office = token(json!({"request_ip": {"in": ["198.51.100.0/24"], "not_in": ["198.51.100.7"]}})).await;
    assert_eq!(office["condition"], json!({"request_ip": {"in": ["198.51.100.0/24"], "not_in": ["198.51.100.7/32"]}}));
    let text = office["token"].as_str().unwrap();
    // The tests' requests come from 127.0.0.1, which the token does not allow.
    let resp = app.raw(Method::GET, &app.url("queues"), Some(text), None).await;
    assert_eq!(resp.expect_error(403), "Cannot use the access token from location: 127.0.0.1");
    assert_eq!(resp.error_code(), 9109);
    // X-Forwarded-For from an untrusted peer is not believed.
    let forwarded = reqwest::Client::new()
        .get(app.url("queues"))
        .bearer_auth(text)
        .header("x-forwarded-for", "198.51.100.8")
        .send()
        .await
        .unwrap();
    assert_eq!(forwarded.status().as_u16(), 403);
    let loopback = token(json!({"request_ip": {"not_in": ["127.0.0.0/8"]}})).await;
    let resp = app.raw(Method::GET, &app.url("queues"), loopback["token"].as_str(), None).await;
    resp.expect_error(403);
    let here = token(json!({"request_ip": {"in": ["127.0.0.1"]}})).await;
    app.raw(Method::GET, &app.url("queues"), here["token"].as_str(), None).await.expect_ok();
    let listed = app.get("tokens").await;
    assert!(listed
        .expect_ok()
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["condition"]["request_ip"]["in"] == json!(["127.0.0.1/32"])));
    for (condition, needle) in [
        (json!({"request_ip": {"in": ["10.0.0.0/33"]}}), "condition.request_ip.in"),
        (json!({"request_ip": {"not_in": ["example.com"]}}), "condition.request_ip.not_in"),
        (json!({"request_ip": {"within": []}}), "within"),
        (json!({"request_ip": {"in": vec!["10.0.0.1"; 101]}}), "at most 100"),
    ] {
        let body = json!({"name": "x", "scopes": ["queues_read"], "condition": condition});
        let message = app.post("tokens", body).await.expect_error(400);
        assert!(message.contains(needle), "{message}");
    }
}

#[sqlx::test]
async fn behind_a_trusted_proxy_the_forwarded_address_is_the_clients(pool: PgPool) {
    let app = crate::helpers::spawn_app_with_args(pool.clone(), &["--trusted-proxies=127.0.0.0/8"]).await;
    let body =
        json!({"name": "office", "scopes": ["queues_read"], "condition": {"request_ip": {"in": ["198.51.100.0/24"]}}});
    let text = app.post("tokens", body).await.expect_ok()["token"].as_str().unwrap().to_owned();
    let from = |forwarded: &'static str| {
        let (url, text) = (app.url("queues"), text.clone());
        async move {
            let resp = reqwest::Client::new().get(url).bearer_auth(text).header("x-forwarded-for", forwarded).send();
            resp.await.unwrap().status().as_u16()
        }
    };
    assert_eq!(from("198.51.100.8").await, 200);
    // What the client claims stands left of what the proxy appended.
    assert_eq!(from("198.51.100.8, 203.0.113.9").await, 403);
    assert_eq!(from("203.0.113.9, 198.51.100.8").await, 200);
}
