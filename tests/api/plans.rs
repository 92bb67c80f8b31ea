//! Plans and limits: the operator's named plans, an account's plan and its own overrides, the limits a
//! tenant reads, a change reaching another node, and the figures the nodes share their rates by.

use std::time::Duration;

use reqwest::Method;
use serde_json::json;
use skiplock::auth::OperatorScope;
use skiplock::engine::limits::Limits;
use skiplock::store::shares::{exchange, forget_older_than, Demand};
use sqlx::PgPool;

use crate::helpers::{new_account, spawn_app, spawn_app_with, wait_until};
use crate::operator::Operator;

#[sqlx::test]
async fn an_operator_makes_changes_and_deletes_plans_and_puts_accounts_on_them(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let operator = Operator::new(&app, &OperatorScope::ALL).await;
    let plans = operator.call(Method::GET, "plans", None).await;
    let default = &plans.expect_ok()[0];
    assert_eq!((default["name"].as_str(), &default["limits"]), (Some("default"), &json!({})));
    assert_eq!(default["effective_limits"]["rate_per_second"], json!(Limits::default().rate_per_second));
    assert_eq!(default["accounts"], json!(1), "the app's own account");

    let pro = json!({"name": "pro", "limits": {"publish_rate_per_second": 2000, "max_queues_per_account": 2}});
    let made = operator.call(Method::POST, "plans", Some(pro.clone())).await;
    let made = made.expect_ok();
    assert_eq!(made["limits"], json!({"publish_rate_per_second": 2000, "max_queues_per_account": 2}));
    assert_eq!(made["effective_limits"]["publish_rate_per_second"], json!(2000));
    assert_eq!(made["effective_limits"]["max_waiting_pulls"], json!(Limits::default().max_waiting_pulls));
    let again = operator.call(Method::POST, "plans", Some(pro)).await.expect_error(409);
    assert!(again.contains("exists already"), "{again}");

    // Bad input is a 400 naming the field; an unknown plan a 404.
    for (method, path, body, needle) in [
        (Method::POST, "plans", json!({"name": "Pro"}), "a plan's name must be"),
        (Method::POST, "plans", json!({"name": "x", "limits": {"speed": 1}}), "no limit named \"speed\""),
        (Method::POST, "plans", json!({"name": "x", "limits": {"rate_burst": -1}}), "limits.rate_burst must be"),
        (Method::POST, "plans", json!({"name": "x", "limits": [1]}), "must be an object"),
        (Method::PATCH, "plans/pro", json!({"limits": {"max_queues_per_account": "2"}}), "max_queues_per_account"),
    ] {
        let message = operator.call(method, path, Some(body)).await.expect_error(400);
        assert!(message.contains(needle), "{path}: {message}");
    }
    operator.call(Method::GET, "plans/gold", None).await.expect_error(404);
    operator.call(Method::PATCH, "plans/gold", Some(json!({"limits": {}}))).await.expect_error(404);
    operator.call(Method::DELETE, "plans/gold", None).await.expect_error(404);

    // A merge patch: null removes a limit, a value sets one.
    let patch = json!({"limits": {"max_queues_per_account": null, "rate_burst": 50}});
    let patched = operator.call(Method::PATCH, "plans/pro", Some(patch)).await;
    assert_eq!(patched.expect_ok()["limits"], json!({"publish_rate_per_second": 2000, "rate_burst": 50}));

    // An account on the plan, with an override of its own over it.
    let (acme, acme_token) = operator.create_account("Acme").await;
    let change = json!({"plan": "pro", "limit_overrides": {"max_queues_per_account": 1}});
    let account = operator.call(Method::PATCH, &format!("accounts/{acme}"), Some(change)).await;
    let account = account.expect_ok();
    assert_eq!(
        (account["plan"].as_str(), &account["limit_overrides"]),
        (Some("pro"), &json!({"max_queues_per_account": 1}))
    );
    assert_eq!(account["limits"]["publish_rate_per_second"], json!(2000));
    assert_eq!(account["limits"]["max_queues_per_account"], json!(1));
    let on_pro = operator.call(Method::GET, "accounts?plan=pro", None).await;
    let ids: Vec<&str> = on_pro.expect_ok().as_array().unwrap().iter().map(|a| a["id"].as_str().unwrap()).collect();
    assert_eq!(ids, [acme.as_str()]);
    // The tenant sees the limits it is held to, and is held to them.
    let tenant = |path: &str| format!("{}/client/v4/accounts/{acme}/{path}", app.address);
    let limits = app.raw(Method::GET, &tenant("limits"), Some(&acme_token), None).await;
    assert_eq!(limits.expect_ok()["plan"], json!("pro"));
    assert_eq!(limits.result()["limits"]["max_queues_per_account"], json!(1));
    let queue = |name: &str| Some(json!({"queue_name": name}).to_string().into_bytes());
    app.raw(Method::POST, &tenant("queues"), Some(&acme_token), queue("one")).await.expect_ok();
    let refused = app.raw(Method::POST, &tenant("queues"), Some(&acme_token), queue("two")).await.expect_error(403);
    assert!(refused.contains("quota of 1 queues"), "{refused}");

    let message = operator
        .call(Method::PATCH, &format!("accounts/{acme}"), Some(json!({"plan": "gold"})))
        .await
        .expect_error(400);
    assert!(message.contains("no plan named \"gold\""), "{message}");
    let message = operator
        .call(Method::PATCH, &format!("accounts/{acme}"), Some(json!({"limit_overrides": {"rate_burst": -1}})))
        .await
        .expect_error(400);
    assert!(message.contains("limit_overrides.rate_burst"), "{message}");

    // A plan accounts are on, and the default plan, are kept.
    let message = operator.call(Method::DELETE, "plans/pro", None).await.expect_error(409);
    assert!(message.contains("accounts are on the plan"), "{message}");
    let message = operator.call(Method::DELETE, "plans/default", None).await.expect_error(409);
    assert!(message.contains("default plan cannot be deleted"), "{message}");
    // Back on the default plan, the override removed: the account has the default limits, and pro can go.
    let back = json!({"plan": "default", "limit_overrides": {"max_queues_per_account": null}});
    let account = operator.call(Method::PATCH, &format!("accounts/{acme}"), Some(back)).await;
    assert_eq!(account.expect_ok()["limits"], serde_json::to_value(Limits::default()).unwrap());
    operator.call(Method::DELETE, "plans/pro", None).await.expect_ok();
    operator.call(Method::GET, "plans/pro", None).await.expect_error(404);
    app.raw(Method::POST, &tenant("queues"), Some(&acme_token), queue("two")).await.expect_ok();
    // An account made on a plan, with overrides, in one request.
    operator.call(Method::POST, "plans", Some(json!({"name": "tiny"}))).await.expect_ok();
    let body = json!({"name": "Initech", "plan": "tiny", "limit_overrides": {"max_waiting_pulls": 3}});
    let created = operator.call(Method::POST, "accounts", Some(body)).await;
    let created = &created.expect_ok()["account"];
    assert_eq!((created["plan"].as_str(), created["limits"]["max_waiting_pulls"].as_i64()), (Some("tiny"), Some(3)));
}

/// The default plan starts as the node's configuration, and what the operator sets on it goes over that;
/// an account on a plan with a publish rate is held to it.
#[sqlx::test]
async fn the_default_plan_is_the_configuration_until_the_operator_changes_it(pool: PgPool) {
    let app = spawn_app_with(pool.clone(), Limits { publish_rate_per_second: 100, ..Limits::default() }).await;
    let operator = Operator::new(&app, &OperatorScope::ALL).await;
    let limits = app.get("limits").await;
    assert_eq!(limits.expect_ok()["limits"]["publish_rate_per_second"], json!(100));
    let q = app.create_queue("busy").await;
    let batch = json!({"messages": vec![json!({"body": "m", "content_type": "text"}); 100]});
    let path = format!("queues/{q}/messages/batch");
    let answers =
        tokio::join!(app.post(&path, batch.clone()), app.post(&path, batch.clone()), app.post(&path, batch.clone()));
    let refused = [answers.0, answers.1, answers.2].into_iter().find(|r| r.status == 429).expect("over the rate");
    assert!(refused.expect_error(429).contains("publish rate of 100 messages per second"));

    let unlimited = json!({"limits": {"publish_rate_per_second": 0}});
    operator.call(Method::PATCH, "plans/default", Some(unlimited)).await.expect_ok();
    assert_eq!(app.get("limits").await.expect_ok()["limits"]["publish_rate_per_second"], json!(0));
    let answers = tokio::join!(
        app.post(&path, batch.clone()),
        app.post(&path, batch.clone()),
        app.post(&path, batch.clone()),
        app.post(&path, batch.clone())
    );
    for answer in [answers.0, answers.1, answers.2, answers.3] {
        answer.expect_ok();
        assert!(answer.headers.get("x-skiplock-held-back-ms").is_none(), "no rate holds it back");
    }
}

/// A change made through one node is enforced by another within two seconds.
#[sqlx::test]
async fn a_plan_change_on_one_node_is_enforced_on_another_within_two_seconds(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let other = app.another_node().await;
    let operator = Operator::new(&app, &OperatorScope::ALL).await;
    other.create_queue("first").await;
    let plan = json!({"name": "one-queue", "limits": {"max_queues_per_account": 1}});
    operator.call(Method::POST, "plans", Some(plan)).await.expect_ok();
    let account = format!("accounts/{}", app.account);
    operator.call(Method::PATCH, &account, Some(json!({"plan": "one-queue"}))).await.expect_ok();
    wait_until("the other node holds the account to one queue", Duration::from_secs(2), || async {
        other.get("limits").await.expect_ok()["limits"]["max_queues_per_account"] == json!(1)
    })
    .await;
    let refused = other.post("queues", json!({"queue_name": "second"})).await.expect_error(403);
    assert!(refused.contains("quota of 1 queues"), "{refused}");

    // A change of the plan itself, not of the account, reaches it too.
    operator
        .call(Method::PATCH, "plans/one-queue", Some(json!({"limits": {"max_queues_per_account": 2}})))
        .await
        .expect_ok();
    wait_until("the other node allows two queues", Duration::from_secs(2), || async {
        other.get("limits").await.expect_ok()["limits"]["max_queues_per_account"] == json!(2)
    })
    .await;
    other.create_queue("second").await;
}

/// Each node writes what it was asked for and reads what the others were, for the same accounts only,
/// within the figures' freshness; old figures are forgotten.
#[sqlx::test]
async fn nodes_share_their_rates_by_the_figures_of_the_others(pool: PgPool) {
    let (acme, _) = new_account(&pool, "acme", &[]).await;
    let (globex, _) = new_account(&pool, "globex", &[]).await;
    let (a, b, c) = (uuid::Uuid::new_v4(), uuid::Uuid::new_v4(), uuid::Uuid::new_v4());
    let asked = |account, per_second| Demand { account, kind: 1, per_second };
    assert_eq!(exchange(&pool, a, &[asked(acme, 600.0)], 3.0).await.unwrap(), [], "alone so far");
    assert_eq!(exchange(&pool, b, &[asked(acme, 200.0)], 3.0).await.unwrap(), [asked(acme, 600.0)]);
    exchange(&pool, c, &[asked(globex, 900.0), Demand { account: acme, kind: 0, per_second: 50.0 }], 3.0)
        .await
        .unwrap();
    // Node a sees b's figure for acme's messages: not c's requests, not globex's.
    assert_eq!(exchange(&pool, a, &[asked(acme, 500.0)], 3.0).await.unwrap(), [asked(acme, 200.0)]);
    // A figure is replaced, not added to.
    assert_eq!(exchange(&pool, b, &[asked(acme, 100.0)], 3.0).await.unwrap(), [asked(acme, 500.0)]);
    let stale: i64 = sqlx::query_scalar("select count(*) from rate_demands").fetch_one(&pool).await.unwrap();
    assert_eq!(stale, 4);
    sqlx::query("update rate_demands set reported_at = now() - interval '10 seconds' where node = $1")
        .bind(b)
        .execute(&pool)
        .await
        .unwrap();
    assert_eq!(exchange(&pool, a, &[asked(acme, 500.0)], 3.0).await.unwrap(), [], "b's figure went stale");
    assert_eq!(forget_older_than(&pool, 5.0).await.unwrap(), 1);
}
