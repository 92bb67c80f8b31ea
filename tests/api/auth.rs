use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::json;
use skiplock::auth::Scope;
use sqlx::PgPool;

use crate::helpers::spawn_app;

#[sqlx::test]
async fn requests_without_a_valid_token_are_401s(pool: PgPool) {
    let app = spawn_app(pool).await;
    let url = app.url("queues");
    let no_token = app.raw(Method::GET, &url, None, None).await;
    assert!(no_token.expect_error(401).contains("Authorization"));
    assert_eq!(no_token.error_code(), 10106);
    for bad in ["nonsense", &app.token[..app.token.len() - 2], &format!("{}xx", &app.token[..app.token.len() - 2])] {
        app.raw(Method::GET, &url, Some(bad), None).await.expect_error(401);
    }
}

#[sqlx::test]
async fn verify_reports_an_active_token(pool: PgPool) {
    let app = spawn_app(pool).await;
    let url = format!("{}/client/v4/user/tokens/verify", app.address);
    let resp = app.raw(Method::GET, &url, Some(&app.token), None).await;
    assert_eq!(resp.expect_ok()["status"], "active");
    assert_eq!(resp.result()["id"].as_str().unwrap().len(), 32);
    assert_eq!(resp.result()["account_id"], app.account.to_string());
    assert_eq!(resp.result()["scopes"], json!(["queues_read", "queues_write", "tokens_write"]));
    app.raw(Method::GET, &url, Some("skl_bogus"), None).await.expect_error(401);
}

#[sqlx::test]
async fn each_endpoint_demands_its_scopes(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.pull_queue("orders", json!({})).await;
    let read = app.token_with(&[Scope::QueuesRead]).await;
    let write = app.token_with(&[Scope::QueuesWrite]).await;
    let both = app.token_with(&[Scope::QueuesRead, Scope::QueuesWrite]).await;
    let call = |token: String, method: Method, path: String, body: serde_json::Value| {
        let app = &app;
        async move { app.raw(method, &app.url(&path), Some(&token), Some(body.to_string().into_bytes())).await.status }
    };
    let cases = [
        (Method::GET, format!("queues/{q}"), json!({}), &read, &write),
        (Method::GET, format!("queues/{q}/metrics"), json!({}), &read, &write),
        (Method::POST, format!("queues/{q}/messages/peek"), json!({}), &read, &write),
        (Method::POST, "queues".to_owned(), json!({"queue_name": "made"}), &write, &read),
        (Method::POST, format!("queues/{q}/messages"), json!({"body": 1}), &write, &read),
        (Method::PATCH, format!("queues/{q}"), json!({}), &write, &read),
        (Method::POST, format!("queues/{q}/purge"), json!({"delete_messages_permanently": true}), &write, &read),
        (Method::POST, format!("queues/{q}/messages/pull"), json!({}), &both, &read),
        (Method::POST, format!("queues/{q}/messages/pull"), json!({}), &both, &write),
        (Method::POST, format!("queues/{q}/messages/ack"), json!({}), &both, &write),
    ];
    for (method, path, body, allowed, refused) in cases {
        let status = call(refused.clone(), method.clone(), path.clone(), body.clone()).await;
        assert_eq!(status, 403, "{method} {path} without its scope");
        let status = call(allowed.clone(), method.clone(), path.clone(), body).await;
        assert_eq!(status, 200, "{method} {path} with its scope");
    }
    let resp = app.raw(Method::GET, &app.url("tokens"), Some(&both), None).await;
    assert!(resp.expect_error(403).contains("tokens_write"));
    assert_eq!(resp.headers["x-should-retry"], "false");
}

#[sqlx::test]
async fn tokens_are_shown_once_listed_without_secrets_and_revocable(pool: PgPool) {
    let app = spawn_app(pool).await;
    let resp = app.post("tokens", json!({"name": "ci", "scopes": ["queues_read", "queues_read"]})).await;
    let created = resp.expect_ok().clone();
    let token = created["token"].as_str().unwrap().to_owned();
    assert!(token.starts_with("skl_"));
    assert_eq!(created["scopes"], json!(["queues_read"]));
    let list = app.get("tokens").await;
    let listed = list.expect_ok().as_array().unwrap();
    assert_eq!(listed.len(), 2);
    assert!(listed.iter().all(|t| t.get("token").is_none() && t.get("secret_hash").is_none()));
    assert!(!list.body.to_string().contains(&token));

    let url = app.url("queues");
    app.raw(Method::GET, &url, Some(&token), None).await.expect_ok();
    let id = created["id"].as_str().unwrap();
    app.delete(&format!("tokens/{id}")).await.expect_ok();
    app.delete(&format!("tokens/{id}")).await.expect_error(404);
    // Revocation reaches every node's verification cache within its lifetime.
    let deadline = Instant::now() + Duration::from_secs(15);
    while app.raw(Method::GET, &url, Some(&token), None).await.status != 401 {
        assert!(Instant::now() < deadline, "a revoked token kept working");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[sqlx::test]
async fn bad_token_requests_are_400s(pool: PgPool) {
    let app = spawn_app(pool).await;
    for (body, needle) in [
        (json!({"scopes": ["queues_read"]}), "name"),
        (json!({"name": "x", "scopes": []}), "scopes"),
        (json!({"name": "x", "scopes": ["admin"]}), "admin"),
        (json!({"name": "x", "scopes": "queues_read"}), "scopes"),
        (json!({"name": "a\u{0}b", "scopes": ["queues_read"]}), "control"),
        (json!({"name": "x", "scopes": ["queues_read", "nope"]}), "nope"),
    ] {
        let message = app.post("tokens", body.clone()).await.expect_error(400);
        assert!(message.contains(needle), "{body}: {message}");
    }
    app.delete("tokens/not-an-id").await.expect_error(400);
    app.delete(&format!("tokens/{}", "0".repeat(32))).await.expect_error(404);
}

#[sqlx::test]
async fn malformed_json_and_unknown_routes_get_clear_4xx(pool: PgPool) {
    let app = spawn_app(pool).await;
    let q = app.pull_queue("orders", json!({})).await;
    for path in [
        "queues".to_owned(),
        format!("queues/{q}/messages"),
        format!("queues/{q}/messages/batch"),
        format!("queues/{q}/messages/pull"),
        format!("queues/{q}/messages/ack"),
        format!("queues/{q}/messages/peek"),
        format!("queues/{q}/messages/purge"),
        format!("queues/{q}/consumers"),
        format!("queues/{q}/purge"),
        "tokens".to_owned(),
    ] {
        for body in [&b"{\"queue_name\": "[..], b"[1, 2", b"{} trailing", b"\xff\xfe"] {
            let resp = app.raw(Method::POST, &app.url(&path), Some(&app.token), Some(body.to_vec())).await;
            let message = resp.expect_error(400);
            assert_eq!(resp.error_code(), 10208, "{path}: {message}");
            assert_eq!(resp.headers["x-should-retry"], "false");
        }
        let resp = app.raw(Method::POST, &app.url(&path), Some(&app.token), Some(b"[]".to_vec())).await;
        resp.expect_error(400);
        assert_eq!(resp.error_code(), 10207, "{path}: wrong type of body");
    }
    app.get("nowhere").await.expect_error(404);
    let resp = app.delete("queues").await;
    assert!(resp.expect_error(405).contains("DELETE"));
    assert_eq!(resp.headers["allow"], "GET, HEAD, POST");
    let head = reqwest::Client::new().head(format!("{}/healthz", app.address)).send().await.unwrap();
    assert_eq!(head.status(), 200, "GET routes answer HEAD");
    let spec = app.raw(Method::GET, &format!("{}/openapi.json", app.address), None, None).await;
    assert!(spec.body["paths"]["/client/v4/accounts/{account_id}/queues/{queue_id}/messages/pull"].is_object());
    let upper = app.account.to_string().to_uppercase();
    let url = format!("{}/client/v4/accounts/{upper}/queues", app.address);
    let resp = app.raw(Method::GET, &url, Some(&app.token), None).await;
    resp.expect_error(404);
    assert_eq!(resp.error_code(), 7003, "an upper-case account id is malformed");
    let resp = app.raw(Method::GET, &format!("{}/client/v4/elsewhere", app.address), Some(&app.token), None).await;
    resp.expect_error(404);
    assert_eq!(resp.error_code(), 7000);
}

#[sqlx::test]
async fn a_token_cannot_grant_scopes_it_does_not_hold(pool: PgPool) {
    let app = spawn_app(pool).await;
    let manager = app.token_with(&[Scope::TokensWrite]).await;
    let body = Some(json!({"name": "escalate", "scopes": ["queues_write"]}).to_string().into_bytes());
    let resp = app.raw(Method::POST, &app.url("tokens"), Some(&manager), body).await;
    assert!(resp.expect_error(403).contains("queues_write"));
    let body = Some(json!({"name": "peer", "scopes": ["tokens_write"]}).to_string().into_bytes());
    app.raw(Method::POST, &app.url("tokens"), Some(&manager), body).await.expect_ok();
}

#[sqlx::test]
async fn argon2_runs_once_per_token_and_revocation_still_takes_effect(pool: PgPool) {
    let account = skiplock::store::accounts::create(&pool, "acme", "default").await.unwrap();
    let (id, token) = skiplock::auth::issue(&pool, account, "ci", &Scope::ALL).await.unwrap();
    let ttl = Duration::from_millis(200);
    let verifier = skiplock::auth::Verifier::<skiplock::auth::AccountTokens>::with_ttl(pool.clone(), ttl);

    // Concurrent requests with a token this node has not seen wait for one verification.
    let checks = futures_util::future::join_all((0..16).map(|_| verifier.verify(&token))).await;
    assert!(checks.iter().all(|c| matches!(c, Ok(Some(p)) if p.account_id == account)));
    assert_eq!(verifier.hashes_run(), 1);

    // Once the outcome is older than the TTL, the row is read again, but the secret is not re-hashed.
    tokio::time::sleep(ttl * 2).await;
    assert!(verifier.verify(&token).await.unwrap().is_some());
    assert_eq!(verifier.hashes_run(), 1);

    // A wrong secret for the same token id is hashed, and refused.
    let forged = format!("{}{}", &token[..token.len() - 4], if token.ends_with("AAAA") { "BBBB" } else { "AAAA" });
    assert!(verifier.verify(&forged).await.unwrap().is_none());
    assert_eq!(verifier.hashes_run(), 2);

    // Revocation is seen at the next check.
    assert!(skiplock::store::tokens::revoke(&pool, account, id).await.unwrap());
    tokio::time::sleep(ttl * 2).await;
    assert!(verifier.verify(&token).await.unwrap().is_none());
}

/// A flood of wrong secrets for a real token id cools that id down: its secrets are hashed at most once
/// a second, so the flood cannot take the node's cores; the holder whose secret this node verified before
/// still gets in without waiting, and one it has not seen gets in at the next second's try.
#[sqlx::test]
async fn wrong_secrets_for_one_token_id_cool_it_down_but_its_holder_gets_in(pool: PgPool) {
    let most_failures = skiplock::auth::failures::PER_TOKEN.most;
    let account = skiplock::store::accounts::create(&pool, "acme", "default").await.unwrap();
    let (_, token) = skiplock::auth::issue(&pool, account, "ci", &Scope::ALL).await.unwrap();
    let ttl = Duration::from_millis(200);
    let verifier = skiplock::auth::Verifier::<skiplock::auth::AccountTokens>::with_ttl(pool.clone(), ttl);
    assert!(verifier.verify(&token).await.unwrap().is_some());
    // Distinct wrong secrets for the same id, so that no cached refusal answers for them.
    let stem = &token[..token.len() - 6];
    let forged = |i: u32| format!("{stem}{i:06}");
    for i in 0..most_failures {
        assert!(verifier.verify(&forged(i)).await.unwrap().is_none());
    }
    assert_eq!(verifier.hashes_run(), 1 + u64::from(most_failures));
    for i in 0..20 {
        assert!(verifier.verify(&forged(100 + i)).await.unwrap().is_none());
    }
    // Twenty more wrong secrets hashed (at most a try a second once cooling; a slow machine may get two).
    assert!(verifier.hashes_run() <= 3 + u64::from(most_failures), "hashed {}", verifier.hashes_run());
    assert!(verifier.refused_cooling() >= 18, "refused unheard {}", verifier.refused_cooling());

    // The holder this node knows: the outcome cached, and once stale, the row read but nothing hashed.
    assert!(verifier.verify(&token).await.unwrap().is_some());
    tokio::time::sleep(ttl * 2).await;
    assert!(verifier.verify(&token).await.unwrap().is_some());

    // A node that has not seen the right secret hears it at the next second's try.
    let fresh = skiplock::auth::Verifier::<skiplock::auth::AccountTokens>::with_ttl(pool.clone(), ttl);
    for i in 0..most_failures {
        assert!(fresh.verify(&forged(i)).await.unwrap().is_none());
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while fresh.verify(&token).await.unwrap().is_none() {
        assert!(Instant::now() < deadline, "the holder's right secret was never heard while cooling");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// An address that keeps failing to authenticate (random token ids here, a row read each) is cooled
/// down: its unverified tokens are refused unheard with a 429 and Retry-After (one a second heard), each
/// refusal answered only after a hold (so that a flood waiting on its answers slows down), while a token
/// this node verified before still gets in from it; refusals are counted by reason.
#[sqlx::test]
async fn an_address_that_keeps_failing_is_cooled_down_but_a_verified_token_gets_in(pool: PgPool) {
    let app = spawn_app(pool).await;
    app.get("queues").await.expect_ok();
    let most = skiplock::auth::failures::PER_ADDRESS.most;
    let random = || format!("skl_{}{}", uuid::Uuid::new_v4().simple(), &app.token[36..]);
    for _ in 0..most {
        app.raw(Method::GET, &app.url("queues"), Some(&random()), None).await.expect_error(401);
    }
    // Cooling, one try a second is still heard: of two at once, one is heard (a 401), one refused unheard.
    let (url, a, b) = (app.url("queues"), random(), random());
    let asked = Instant::now();
    let (first, second) =
        tokio::join!(app.raw(Method::GET, &url, Some(&a), None), app.raw(Method::GET, &url, Some(&b), None));
    assert!(asked.elapsed() >= skiplock::auth::failures::HOLD, "answered after {:?}", asked.elapsed());
    let (mut statuses, cooled) = (vec![first.status, second.status], if first.status == 429 { first } else { second });
    statuses.sort();
    assert_eq!(statuses, [401, 429]);
    let message = cooled.expect_error(429);
    assert!(message.contains("too many failed authentications from this address"), "{message}");
    assert_eq!(cooled.headers["retry-after"], "60");
    app.get("queues").await.expect_ok();
    let refusals = |reason: &str| app.metrics.auth_refusals.with_label_values(&[reason]).get();
    assert_eq!(refusals("invalid_token"), u64::from(most) + 1);
    assert_eq!(refusals("address_cooling"), 1);
}
