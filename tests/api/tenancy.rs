use reqwest::Method;
use serde_json::json;
use skiplock::auth::Scope;
use sqlx::PgPool;

use crate::helpers::{lease, new_account, spawn_app, TestApp};

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
        (Method::GET, "limits".to_owned()),
        (Method::GET, "audit_logs".to_owned()),
        (Method::GET, "usage".to_owned()),
        (Method::GET, format!("usage?queue_id={theirs}")),
        (Method::GET, "event_subscriptions/subscriptions".to_owned()),
        (Method::POST, "event_subscriptions/subscriptions".to_owned()),
    ] {
        let resp = app.raw(method.clone(), &format!("{theirs_url}/{path}"), Some(&token), Some(b"{}".to_vec())).await;
        resp.expect_error(404);
    }
    // The account object itself, and the account lists, which show Mallory only her own.
    app.raw(Method::GET, &theirs_url, Some(&token), None).await.expect_error(404);
    for list in ["accounts", "memberships"] {
        let resp = app.raw(Method::GET, &format!("{}/client/v4/{list}", app.address), Some(&token), None).await;
        let ids: Vec<String> = resp
            .expect_ok()
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.get("account").unwrap_or(a)["id"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(ids, vec![mallory.to_string()], "{list}");
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
        (Method::POST, format!("queues/{theirs}/messages"), body(json!({"body": 1, "ordering_key": "k"}))),
        (Method::POST, format!("queues/{theirs}/messages/pull"), body(json!({}))),
        (Method::POST, format!("queues/{theirs}/messages/ack"), body(json!({"acks": [{"lease_id": their_lease}]}))),
        (
            Method::POST,
            format!("queues/{theirs}/messages/extend"),
            body(json!({"leases": [{"lease_id": their_lease, "visibility_timeout_ms": 1}]})),
        ),
        (Method::POST, format!("queues/{theirs}/messages/peek"), body(json!({}))),
        (Method::POST, format!("queues/{theirs}/messages/purge"), body(json!({"refs": []}))),
        (Method::POST, format!("queues/{theirs}/redrive"), body(json!({}))),
        (Method::GET, format!("queues/{theirs}/redrive"), None),
        (Method::GET, format!("usage?queue_id={theirs}"), None),
        (Method::GET, format!("usage?queue_id={theirs}&granularity=hour"), None),
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
    let extend = body(json!({"leases": [{"lease_id": their_lease, "visibility_timeout_ms": 1}]}));
    let resp = app.raw(Method::POST, &format!("{mine}/queues/{own}/messages/extend"), Some(&token), extend).await;
    assert_eq!(resp.expect_ok()["extendCount"], 0);
    assert!(resp.result()["warnings"].get(&their_lease).is_some());
    // Naming the victim's consumer in a pull of Mallory's own queue finds no consumer.
    let pulling = body(json!({"type": "http_pull"}));
    app.raw(Method::POST, &format!("{mine}/queues/{own}/consumers"), Some(&token), pulling).await.expect_ok();
    let pull = body(json!({"consumer_id": their_consumer}));
    let resp = app.raw(Method::POST, &format!("{mine}/queues/{own}/messages/pull"), Some(&token), pull).await;
    assert!(resp.expect_error(400).contains("not a consumer of this queue"));

    // Nothing of the victim's changed.
    let queue = app.get(&format!("queues/{theirs}")).await;
    assert_eq!(queue.expect_ok()["queue_name"], "theirs");
    assert_eq!(queue.result()["settings"]["delivery_paused"], false);
    assert_eq!(queue.result()["consumers_total_count"], 1);
    assert_eq!(app.backlog(&theirs).await, 1);
    assert_eq!(app.ack(&theirs, &[&their_lease], json!([])).await["ackCount"], 1);
}

/// Every endpoint, with every combination of scopes, tried by another account with the victim's queue,
/// consumer, lease, ref and token ids, on the victim's path and on its own: never a success that
/// touches the victim, never a server error.
#[sqlx::test]
async fn the_isolation_matrix_has_no_successes_and_no_server_errors(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let victim_q = app.pull_queue("victim", json!({})).await;
    app.publish_texts(&victim_q, &["one", "two"]).await;
    let consumer = app.get(&format!("queues/{victim_q}/consumers")).await.expect_ok()[0]["consumer_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let lease_id =
        lease(&app.pull(&victim_q, json!({"batch_size": 1, "visibility_timeout_ms": 600_000})).await[0]).to_owned();
    // A second consumer of the victim's queue, and the hidden lane it reads.
    let second = app.post(&format!("queues/{victim_q}/consumers"), json!({"type": "http_pull"})).await;
    let second = second.expect_ok()["consumer_id"].as_str().unwrap().to_owned();
    let lane: String =
        sqlx::query_scalar("select replace(id::text, '-', '') from queues where parent_queue_id is not null")
            .fetch_one(&pool)
            .await
            .unwrap();
    let peeked = app.post(&format!("queues/{victim_q}/messages/peek"), json!({})).await;
    let reference = peeked.expect_ok()["messages"][0]["ref"].as_str().unwrap().to_owned();
    let message = peeked.result()["messages"][0]["id"].as_str().unwrap().to_owned();
    let victim_token = app.get("tokens").await.expect_ok()[0]["id"].as_str().unwrap().to_owned();
    // A redrive task of the victim's (an empty queue: it completes at once and moves nothing).
    let victim_dlq = app.create_queue("victim-dlq").await;
    let task = app.post(&format!("queues/{victim_dlq}/redrive"), json!({"destination_queue": "victim"})).await;
    let redrive = task.body["result"]["redrive_id"].as_str().unwrap().to_owned();
    // A schedule of the victim's, on a cadence that does not fire during the test.
    let tick = json!({"body": "tick", "content_type": "text"});
    let made = app.post("schedules", json!({"queue_id": victim_q, "cron": "0 0 1 1 *", "message": tick})).await;
    let schedule = made.body["result"]["schedule_id"].as_str().unwrap().to_owned();
    // A flow key of the victim's with limits of its own.
    app.put(&format!("queues/{victim_q}/flow_keys/vip"), json!({"parallelism": 7})).await.expect_ok();
    // An event subscription of the victim's, from its queue into its dead-letter queue.
    let to_dlq = json!({"type": "queues.queue", "queue_id": victim_dlq});
    let subscribed = app
        .post(
            "event_subscriptions/subscriptions",
            json!({"name": "victim-events", "source": {"type": "queues.queue", "queue_id": victim_q},
                   "events": ["messages.dead_lettered"], "destination": to_dlq}),
        )
        .await;
    let subscription = subscribed.expect_ok()["id"].as_str().unwrap().to_owned();
    // A topic of the victim's, bound to its queue.
    let topic =
        app.post("topics", json!({"name": "victim-topic"})).await.expect_ok()["id"].as_str().unwrap().to_owned();
    let bound =
        app.post(&format!("topics/{topic}/bindings"), json!({"queue_id": victim_q, "pattern": "orders.#"})).await;
    let binding = bound.expect_ok()["id"].as_str().unwrap().to_owned();

    let scope_sets: Vec<Vec<Scope>> = (0u8..8)
        .map(|bits| Scope::ALL.iter().enumerate().filter(|(i, _)| bits & (1 << i) != 0).map(|(_, s)| *s).collect())
        .collect();
    let mut tried = 0;
    for scopes in scope_sets {
        // A token with no scope is still a valid token of its account.
        let (mallory, token) = new_account(&pool, "mallory", &scopes).await;
        let prefixes = [
            format!("{}/client/v4/accounts/{}", app.address, app.account), // the victim's path
            format!("{}/client/v4/accounts/{mallory}", app.address),       // the victim's ids on Mallory's path
        ];
        for prefix in &prefixes {
            let q = &victim_q;
            let cases: Vec<(Method, String, serde_json::Value)> = vec![
                (Method::GET, "queues".into(), json!(null)),
                (Method::POST, "queues".into(), json!({"queue_name": "intruder"})),
                (Method::GET, format!("queues/{q}"), json!(null)),
                (Method::PUT, format!("queues/{q}"), json!({"queue_name": "renamed"})),
                (Method::PATCH, format!("queues/{q}"), json!({"settings": {"delivery_paused": true}})),
                (Method::DELETE, format!("queues/{q}"), json!(null)),
                (Method::GET, format!("queues/{q}/metrics"), json!(null)),
                (Method::GET, format!("queues/{q}/stats"), json!(null)),
                (Method::GET, "stats/queues".into(), json!(null)),
                (Method::GET, "stats/queues?page=2&per_page=1".into(), json!(null)),
                (Method::GET, "queues?page=2&per_page=1".into(), json!(null)),
                (Method::POST, format!("queues/{q}/purge"), json!({"delete_messages_permanently": true})),
                (Method::GET, format!("queues/{q}/purge"), json!(null)),
                (Method::GET, format!("queues/{q}/consumers"), json!(null)),
                (Method::POST, format!("queues/{q}/consumers"), json!({"type": "http_pull"})),
                (Method::GET, format!("queues/{q}/consumers/{consumer}"), json!(null)),
                (Method::PUT, format!("queues/{q}/consumers/{consumer}"), json!({"settings": {}})),
                (Method::DELETE, format!("queues/{q}/consumers/{consumer}"), json!(null)),
                (Method::POST, format!("queues/{q}/consumers/{consumer}/rotate_secret"), json!({})),
                (Method::GET, format!("queues/{q}/consumers/{consumer}/attempts"), json!(null)),
                (Method::GET, format!("queues/{q}/consumers/{consumer}/attempts?outcome=success"), json!(null)),
                (Method::POST, format!("queues/{q}/consumers/{consumer}/test"), json!({})),
                (Method::GET, format!("queues/{q}/messages/{message}/attempts"), json!(null)),
                (Method::POST, format!("queues/{q}/messages"), json!({"body": 1})),
                (Method::POST, format!("queues/{q}/messages/batch"), json!({"messages": [{"body": 1}]})),
                (
                    Method::POST,
                    format!("queues/{q}/messages/batch"),
                    json!({"messages": [{"body": 1, "ordering_key": "k", "idempotency_key": "i"}]}),
                ),
                (Method::POST, format!("queues/{q}/messages/pull"), json!({})),
                (Method::POST, format!("queues/{q}/messages/pull"), json!({"consumer_id": second})),
                (Method::GET, format!("queues/{lane}"), json!(null)),
                (Method::POST, format!("queues/{lane}/messages/pull"), json!({})),
                (Method::POST, format!("queues/{lane}/messages"), json!({"body": 1})),
                (
                    Method::POST,
                    format!("queues/{q}/messages/ack"),
                    json!({"acks": [{"lease_id": lease_id}], "retries": [{"lease_id": lease_id}]}),
                ),
                (
                    Method::POST,
                    format!("queues/{q}/messages/extend"),
                    json!({"leases": [{"lease_id": lease_id, "visibility_timeout_ms": 1}]}),
                ),
                (Method::POST, format!("queues/{q}/messages/peek"), json!({})),
                (Method::POST, format!("queues/{q}/messages/purge"), json!({"refs": [{"ref": reference}]})),
                (Method::POST, format!("queues/{q}/redrive"), json!({"refs": [{"ref": reference}]})),
                (Method::GET, format!("queues/{q}/redrive"), json!(null)),
                (Method::GET, format!("queues/{victim_dlq}/redrive/{redrive}"), json!(null)),
                (Method::DELETE, format!("queues/{victim_dlq}/redrive/{redrive}"), json!(null)),
                (Method::GET, "tokens".into(), json!(null)),
                (Method::GET, "limits".into(), json!(null)),
                (Method::GET, "audit_logs".into(), json!(null)),
                (Method::GET, "usage".into(), json!(null)),
                (Method::GET, "usage?granularity=hour".into(), json!(null)),
                (Method::GET, format!("usage?queue_id={q}"), json!(null)),
                (Method::POST, "tokens".into(), json!({"name": "t", "scopes": ["queues_read"]})),
                (Method::DELETE, format!("tokens/{victim_token}"), json!(null)),
                (Method::GET, "event_subscriptions/subscriptions".into(), json!(null)),
                (Method::POST, "event_subscriptions/subscriptions".into(), json!({"name": "s"})),
                (
                    Method::POST,
                    "event_subscriptions/subscriptions".into(),
                    json!({"name": "s", "source": {"type": "queues.queue", "queue_id": q}, "events": ["consumer.failing"],
                           "destination": {"type": "queues.queue", "queue_id": victim_dlq}}),
                ),
                (
                    Method::POST,
                    "event_subscriptions/subscriptions".into(),
                    json!({"name": "s", "source": {"type": "queues"}, "events": ["consumer.failing"],
                           "destination": {"type": "queues.queue", "queue_id": victim_dlq}}),
                ),
                (Method::GET, format!("event_subscriptions/subscriptions/{subscription}"), json!(null)),
                (Method::PATCH, format!("event_subscriptions/subscriptions/{subscription}"), json!({"enabled": false})),
                (Method::DELETE, format!("event_subscriptions/subscriptions/{subscription}"), json!(null)),
                (Method::GET, "schedules".into(), json!(null)),
                (
                    Method::POST,
                    "schedules".into(),
                    json!({"queue_id": q, "interval_seconds": 1, "message": {"body": "x", "content_type": "text"}}),
                ),
                (Method::GET, format!("schedules/{schedule}"), json!(null)),
                (Method::PATCH, format!("schedules/{schedule}"), json!({"interval_seconds": 1})),
                (Method::POST, format!("schedules/{schedule}/pause"), json!({})),
                (Method::POST, format!("schedules/{schedule}/resume"), json!({})),
                (Method::DELETE, format!("schedules/{schedule}"), json!(null)),
                (Method::GET, format!("queues/{q}/flow_keys"), json!(null)),
                (Method::GET, format!("queues/{q}/flow_keys/vip"), json!(null)),
                (Method::PUT, format!("queues/{q}/flow_keys/vip"), json!({"parallelism": 1})),
                (Method::PUT, format!("queues/{q}/flow_keys/fresh"), json!({"paused": true})),
                (Method::DELETE, format!("queues/{q}/flow_keys/vip"), json!(null)),
                (Method::POST, format!("queues/{q}/flow_keys/vip/pause"), json!({})),
                (Method::POST, format!("queues/{q}/flow_keys/vip/resume"), json!({})),
                (Method::POST, format!("queues/{q}/messages"), json!({"body": 1, "flow_control_key": "vip"})),
                (Method::GET, "topics".into(), json!(null)),
                (Method::POST, "topics".into(), json!({"name": "intruder"})),
                (Method::GET, format!("topics/{topic}"), json!(null)),
                (Method::DELETE, format!("topics/{topic}"), json!(null)),
                (Method::POST, format!("topics/{topic}/bindings"), json!({"queue_id": q, "pattern": "#"})),
                (Method::GET, format!("topics/{topic}/bindings"), json!(null)),
                (Method::DELETE, format!("topics/{topic}/bindings/{binding}"), json!(null)),
                (
                    Method::POST,
                    format!("topics/{topic}/messages"),
                    json!({"routing_key": "orders.new", "messages": [{"body": 1}]}),
                ),
                (Method::POST, format!("topics/{topic}/route"), json!({"routing_key": "orders.new"})),
            ];
            for (method, path, body) in cases {
                let body = (!body.is_null()).then(|| body.to_string().into_bytes());
                let resp = app.raw(method.clone(), &format!("{prefix}/{path}"), Some(&token), body).await;
                tried += 1;
                assert!(resp.status < 500, "{method} {prefix}/{path} with {scopes:?}: {} {}", resp.status, resp.body);
                // Mallory's own usage is hers to read; of the victim's queue, it is a 404.
                let on_own_collection = prefix.contains(&mallory.to_string())
                    && (matches!(path.as_str(), "usage" | "usage?granularity=hour")
                        || matches!(
                            path.split('?').next().unwrap(),
                            "queues"
                                | "stats/queues"
                                | "tokens"
                                | "limits"
                                | "audit_logs"
                                | "event_subscriptions/subscriptions"
                                | "schedules"
                                | "topics"
                        ));
                if !on_own_collection {
                    assert!(resp.status >= 400, "{method} {prefix}/{path} with {scopes:?} succeeded: {}", resp.body);
                } else if resp.status == 200 {
                    let body = resp.body.to_string();
                    assert!(
                        !body.contains(&*victim_q)
                            && !body.contains(&*victim_dlq)
                            && !body.contains(&*schedule)
                            && !body.contains(&*subscription)
                            && !body.contains(&*topic),
                        "{path} showed the victim's queue or schedule"
                    );
                }
            }
        }
    }
    assert_eq!(tried, 8 * 2 * 78);
    // The victim is untouched.
    let queue = app.get(&format!("queues/{victim_q}")).await;
    assert_eq!(queue.expect_ok()["queue_name"], "victim");
    assert_eq!(queue.result()["settings"]["delivery_paused"], false);
    assert_eq!(app.backlog(&victim_q).await, 2);
    assert_eq!(app.get("tokens").await.expect_ok().as_array().unwrap().len(), 1);
    assert_eq!(app.get(&format!("queues/{victim_q}/redrive")).await.expect_ok(), &json!([]));
    assert_eq!(app.get(&format!("queues/{victim_dlq}/redrive")).await.expect_ok().as_array().unwrap().len(), 1);
    let untouched = app.get(&format!("schedules/{schedule}")).await;
    assert_eq!(untouched.expect_ok()["cron"], "0 0 1 1 *");
    assert_eq!(untouched.result()["paused"], false);
    assert_eq!(app.get("schedules").await.expect_ok().as_array().unwrap().len(), 1);
    let vip = app.get(&format!("queues/{victim_q}/flow_keys/vip")).await;
    assert_eq!((vip.expect_ok()["parallelism"].as_i64(), vip.result()["paused"].as_bool()), (Some(7), Some(false)));
    assert_eq!(app.get(&format!("queues/{victim_q}/flow_keys")).await.expect_ok().as_array().unwrap().len(), 1);
    let kept = app.get(&format!("event_subscriptions/subscriptions/{subscription}")).await;
    assert_eq!(
        (kept.expect_ok()["enabled"].as_bool(), kept.result()["name"].as_str()),
        (Some(true), Some("victim-events"))
    );
    assert_eq!(app.get("event_subscriptions/subscriptions").await.expect_ok().as_array().unwrap().len(), 1);
    let kept = app.get(&format!("topics/{topic}")).await;
    assert_eq!(kept.expect_ok()["bindings"][0]["id"], binding.as_str());
    assert_eq!(app.get("topics").await.expect_ok().as_array().unwrap().len(), 1);
    assert_eq!(app.ack(&victim_q, &[&lease_id], json!([])).await["ackCount"], 1);
}

/// The operator API and the tenant API, each tried with the other's tokens: every admin route with no
/// token, with accounts' tokens of every scope set, and (its writes) with a read-only operator token;
/// every tenant route with operator tokens; and an account's token revoked through another account's
/// path. Never a success, never a server error, and nothing changes.
#[sqlx::test]
async fn the_operator_api_and_the_tenant_api_refuse_each_others_tokens(pool: PgPool) {
    use skiplock::auth::OperatorScope;
    let app = spawn_app(pool.clone()).await;
    let q = app.pull_queue("victim", json!({})).await;
    app.publish_texts(&q, &["one"]).await;
    let victim = app.account.to_string();
    let victim_token = app.get("tokens").await.expect_ok()[0]["id"].as_str().unwrap().to_owned();
    let (other, _) = new_account(&pool, "other", &Scope::ALL).await;
    let admin = |path: &str| format!("{}/admin/v1/{path}", app.admin_address);
    let writes: Vec<(Method, String, serde_json::Value)> = vec![
        (Method::POST, admin("accounts"), json!({"name": "intruder"})),
        (Method::PATCH, admin(&format!("accounts/{victim}")), json!({"name": "renamed"})),
        (Method::POST, admin(&format!("accounts/{victim}/suspend")), json!({})),
        (Method::POST, admin(&format!("accounts/{victim}/resume")), json!({})),
        (Method::POST, admin(&format!("accounts/{victim}/tokens")), json!({"name": "t", "scopes": ["queues_read"]})),
        (Method::DELETE, admin(&format!("accounts/{victim}/tokens/{victim_token}")), json!(null)),
        (Method::PATCH, admin(&format!("accounts/{victim}")), json!({"plan": "intruder"})),
        (Method::POST, admin("plans"), json!({"name": "intruder"})),
        (Method::PATCH, admin("plans/default"), json!({"limits": {"max_queues_per_account": 1}})),
        (Method::DELETE, admin("plans/default"), json!(null)),
    ];
    let reads: Vec<(Method, String, serde_json::Value)> = vec![
        (Method::GET, admin("accounts"), json!(null)),
        (Method::GET, admin(&format!("accounts/{victim}")), json!(null)),
        (Method::GET, admin(&format!("accounts/{victim}/tokens")), json!(null)),
        (Method::GET, admin("plans"), json!(null)),
        (Method::GET, admin("plans/default"), json!(null)),
        (Method::GET, admin("audit_logs"), json!(null)),
        (Method::GET, admin(&format!("audit_logs?account_id={victim}")), json!(null)),
        (Method::GET, admin("usage"), json!(null)),
        (Method::GET, admin(&format!("usage?format=csv&account_id={victim}")), json!(null)),
    ];
    let tenant = |path: &str| format!("{}/client/v4/accounts/{victim}/{path}", app.address);
    let tenant_routes: Vec<(Method, String, serde_json::Value)> = vec![
        (Method::GET, format!("{}/client/v4/user/tokens/verify", app.address), json!(null)),
        (Method::GET, format!("{}/client/v4/accounts", app.address), json!(null)),
        (Method::GET, tenant("queues"), json!(null)),
        (Method::POST, tenant("queues"), json!({"queue_name": "intruder"})),
        (Method::POST, tenant(&format!("queues/{q}/messages")), json!({"body": 1})),
        (Method::POST, tenant(&format!("queues/{q}/messages/pull")), json!({})),
        (Method::GET, tenant("tokens"), json!(null)),
        (Method::GET, tenant("limits"), json!(null)),
        (Method::GET, tenant("audit_logs"), json!(null)),
        (Method::GET, tenant("usage"), json!(null)),
        (Method::POST, tenant("tokens"), json!({"name": "t", "scopes": ["queues_read"]})),
        (Method::DELETE, tenant(&format!("tokens/{victim_token}")), json!(null)),
    ];
    let mut tried = 0;
    let try_all = |token: Option<String>, cases: Vec<(Method, String, serde_json::Value)>, what: String| {
        let app = &app;
        async move {
            for (method, url, body) in cases {
                let body = (!body.is_null()).then(|| body.to_string().into_bytes());
                let resp = app.raw(method.clone(), &url, token.as_deref(), body).await;
                assert!((400..500).contains(&resp.status), "{method} {url} with {what}: {} {}", resp.status, resp.body);
            }
        }
    };
    let everything: Vec<_> = writes.iter().chain(&reads).cloned().collect();
    try_all(None, everything.clone(), "no token".into()).await;
    tried += everything.len();
    for bits in 0u8..8 {
        let scopes: Vec<Scope> =
            Scope::ALL.iter().enumerate().filter(|(i, _)| bits & (1 << i) != 0).map(|(_, s)| *s).collect();
        let (_, token) = new_account(&pool, "mallory", &scopes).await;
        try_all(Some(token), everything.clone(), format!("an account's token {scopes:?}")).await;
        tried += everything.len();
    }
    let reader = crate::helpers::operator_token(&pool, &[OperatorScope::Read]).await;
    try_all(Some(reader), writes.clone(), "a read-only operator token".into()).await;
    tried += writes.len();
    for scopes in [vec![OperatorScope::Read], vec![OperatorScope::Write], OperatorScope::ALL.to_vec()] {
        let token = crate::helpers::operator_token(&pool, &scopes).await;
        try_all(Some(token), tenant_routes.clone(), format!("an operator token {scopes:?}")).await;
        tried += tenant_routes.len();
    }
    // The victim's token through another account's path on the operator API.
    let writer = crate::helpers::operator_token(&pool, &OperatorScope::ALL).await;
    let cross = vec![(Method::DELETE, admin(&format!("accounts/{other}/tokens/{victim_token}")), json!(null))];
    try_all(Some(writer), cross, "an operator token on another account's path".into()).await;
    tried += 1;
    assert_eq!(tried, 19 + 8 * 19 + 10 + 3 * 12 + 1);
    // Nothing changed.
    assert_eq!(app.backlog(&q).await, 1);
    assert_eq!(app.get("tokens").await.expect_ok().as_array().unwrap().len(), 1);
    assert_eq!(app.get("queues").await.expect_ok().as_array().unwrap().len(), 1);
    let status: String = sqlx::query_scalar("select status from accounts where id = $1::uuid")
        .bind(&victim)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(status, "active");
    let plans: Vec<(String, String)> =
        sqlx::query_as("select name, limits::text from plans").fetch_all(&pool).await.unwrap();
    assert_eq!(plans, [("default".to_owned(), "{}".to_owned())], "no plan made or changed");
}

/// Every page of an account's queue list and queue stats holds only its own queues, and the totals count
/// only them, whatever the page size, with another account's queues named in between and alike.
#[sqlx::test]
async fn every_page_of_the_lists_shows_only_the_accounts_own_queues(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    // The victim's dead-letter queue (created with its consumer) has the name of one of Mallory's queues.
    let victim_source = app.pull_queue("b-source", json!({"dead_letter_queue": "shared"})).await;
    let victim_shared = app.get("queues?name=shared").await.expect_ok()[0]["queue_id"].as_str().unwrap().to_owned();
    app.publish_texts(&victim_shared, &["one", "two"]).await;
    for name in ["a", "c", "e", "g"] {
        app.create_queue(name).await;
    }
    let (mallory, token) = new_account(&pool, "mallory", &Scope::ALL).await;
    let theirs = TestApp::remote(pool.clone(), app.address.clone(), mallory, token.clone());
    for name in ["b", "d", "shared"] {
        theirs.create_queue(name).await;
    }
    let own = ["b", "d", "shared"];

    for list in ["stats/queues", "queues"] {
        for per_page in [1, 2, 3, 1000] {
            let mut seen = Vec::new();
            for page in 1..=(3 / per_page + 2) {
                let resp = theirs.get(&format!("{list}?page={page}&per_page={per_page}")).await;
                let items = resp.expect_ok().as_array().unwrap().clone();
                assert_eq!(resp.body["result_info"]["total_count"], 3, "{list} page {page} of {per_page}");
                for item in &items {
                    let name = item["queue_name"].as_str().unwrap().to_owned();
                    assert!(own.contains(&name.as_str()), "{list} page {page} of {per_page} showed {name}");
                    assert_ne!(item["queue_id"], json!(victim_shared), "{list} showed the victim's queue");
                    if list == "stats/queues" {
                        assert_eq!(item["dead_letter_sources"], json!([]), "{name} has no source of Mallory's");
                        assert_eq!(item["backlog_count"], 0, "{name}");
                    }
                }
                seen.extend(items.iter().map(|i| i["queue_name"].as_str().unwrap().to_owned()));
            }
            seen.sort();
            assert_eq!(seen, own, "{list} by {per_page}: every own queue once, and only those");
        }
        // Any page of the victim's list, with Mallory's token, is not found.
        let victim_url = format!("{}/client/v4/accounts/{}/{list}?page=2&per_page=1", app.address, app.account);
        app.raw(Method::GET, &victim_url, Some(&token), None).await.expect_error(404);
    }
    // The victim's figures still name its own dead-letter queue, not Mallory's of the same name.
    let victim = app.get("stats/queues?per_page=1000").await;
    let stats = victim.expect_ok().as_array().unwrap();
    let source = stats.iter().find(|s| s["queue_id"] == json!(victim_source)).unwrap();
    assert_eq!(source["dead_letter_backlog_count"], 2);
    let shared = stats.iter().find(|s| s["queue_name"] == "shared").unwrap();
    assert_eq!(shared["dead_letter_sources"][0]["queue_id"], json!(victim_source));
    assert_eq!(victim.body["result_info"]["total_count"], 6);
}

/// The store's queue functions take an `OwnedQueue`, which only the queue's own account gets; webhook
/// acks of many batches go in one statement (`dispatch/acks.rs`), each deleting only from its own queue.
#[sqlx::test]
async fn only_its_account_owns_a_queue_and_grouped_acks_delete_from_their_own_queue(pool: PgPool) {
    use skiplock::ids::{MessageId, QueueId};
    use skiplock::store::messages::{ack_batches, AckedBatch};
    use skiplock::store::owned::Owners;
    use std::str::FromStr;
    let app = spawn_app(pool.clone()).await;
    let queue = app.pull_queue("theirs", json!({})).await;
    app.publish_texts(&queue, &["one", "two"]).await;
    let ids: Vec<MessageId> =
        sqlx::query_scalar("select id from messages order by published_at, id").fetch_all(&pool).await.unwrap();
    let (mallory, _) = new_account(&pool, "mallory", &Scope::ALL).await;
    let queue_id = QueueId::from_str(&queue).unwrap();
    let owners = Owners::default();
    assert!(owners.resolve(&pool, mallory, queue_id).await.unwrap().is_none(), "mallory gets no hold on the queue");
    let owned = owners.resolve(&pool, app.account, queue_id).await.unwrap().expect("its account owns it");
    let other = app.pull_queue("other", json!({})).await;
    let other = owners.resolve(&pool, app.account, QueueId::from_str(&other).unwrap()).await.unwrap().unwrap();
    let batch = |queue, ids: &[MessageId]| AckedBatch { queue, ids: ids.to_vec() };
    let found = ack_batches(&pool, &[batch(other, &ids[..1]), batch(owned, &ids[1..])]).await.unwrap();
    assert_eq!(found.len(), 2, "both queues are found");
    let of = |q: QueueId| found.iter().find(|(id, _)| *id == q).map(|(_, d)| d.ids.clone()).unwrap();
    assert_eq!(of(owned.id()), vec![ids[1]], "the queue's own batch deleted its message");
    assert!(of(other.id()).is_empty(), "a batch naming another queue's message deleted nothing");
    assert_eq!(app.backlog(&queue).await, 1);
}
