//! Secrets at rest: with SKIPLOCK_SECRET_KEY, webhook signing secrets and the lease key are stored sealed
//! (the table shows no secret) and deliveries still verify; secrets stored in the clear are sealed when a
//! node with a key starts; a rotation moves every secret to a new key while nodes run; a node that lacks
//! the key the database's secrets are under refuses to start, saying which key it needs.

use std::time::Duration;

use serde_json::json;
use skiplock::auth::sealing::Keyring;
use skiplock::engine::limits::Limits;
use skiplock::engine::sealing::Reseal;
use skiplock::startup::{Node, Role};
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

use crate::helpers::{lease, spawn_app, spawn_app_with_args, webhook_consumer, TestApp};
use crate::receiver::{Answer, Receiver};

/// The secrets stored in the clear anywhere: webhook secrets, and a lease key not sealed.
async fn secrets_in_the_clear(pool: &PgPool) -> i64 {
    sqlx::query_scalar(
        "select (select count(*) from consumers
                  where signing_secret like 'whsec_%' or previous_signing_secret like 'whsec_%')
              + (select count(*) from server_keys where secret not like 'sealed:v1:%'::bytea)",
    )
    .fetch_one(pool)
    .await
    .unwrap()
}

/// The webhook consumers whose secret is sealed under `key`.
async fn sealed_under(pool: &PgPool, key: &str) -> i64 {
    let prefix = Keyring::new(Some(key), &[]).unwrap().current_prefix().unwrap();
    sqlx::query_scalar("select count(*) from consumers where starts_with(signing_secret, $1)")
        .bind(prefix)
        .fetch_one(pool)
        .await
        .unwrap()
}

/// Starts a node with `args` added to the tests' settings, answering its error if it refuses.
async fn try_start(pool: &PgPool, args: &[&str]) -> Result<Node, String> {
    let base = ["--database-url=postgres://unused", "--bind=127.0.0.1:0", "--metrics-bind=127.0.0.1:0"];
    let settings = skiplock::config::Settings::from_args(base.iter().chain(args)).unwrap();
    Node::start(&settings, &[Role::Api], pool.clone(), CancellationToken::new()).await.map_err(|e| format!("{e:#}"))
}

/// A dispatcher whose engine holds `keys`.
async fn dispatcher_with(pool: &PgPool, keys: Keyring) -> skiplock::dispatch::Dispatcher {
    let engine =
        skiplock::engine::Engine::new(pool.clone(), Default::default(), Limits::default(), keys).await.unwrap();
    let settings = skiplock::dispatch::DispatchSettings { timeout: Duration::from_secs(5), ..Default::default() };
    let guard = skiplock::dispatch::guard::AddressGuard::new(vec!["127.0.0.0/8".parse().unwrap()]);
    skiplock::startup::dispatcher(&engine, settings, guard)
}

#[sqlx::test]
async fn secrets_are_sealed_and_deliveries_still_verify(pool: PgPool) {
    let key = Keyring::new_key();
    let app = spawn_app_with_args(pool.clone(), &["--secret-key", &key]).await;
    let receiver = Receiver::start(|_| Answer::status(200)).await;
    let hook = app.webhook_queue("sealed", &receiver.url, json!({})).await;
    assert!(hook.secret.starts_with("whsec_"), "the answer shows the secret once, in the clear");
    assert_eq!(secrets_in_the_clear(&pool).await, 0);
    let stored: String = sqlx::query_scalar("select signing_secret from consumers").fetch_one(&pool).await.unwrap();
    assert!(stored.starts_with("sealed:v1:") && !stored.contains(&hook.secret[6..]), "{stored}");

    app.publish(&hook.queue, json!({"body": "hi", "content_type": "text"})).await;
    let d = dispatcher_with(&pool, Keyring::new(Some(&key), &[]).unwrap()).await;
    let consumer = webhook_consumer(&d, &hook).await;
    assert_eq!(d.dispatch_once(&consumer).await.unwrap().map(|o| o.acked), Some(1));
    let got = &receiver.received()[0];
    let (id, timestamp) = (got.header("webhook-id"), got.header("webhook-timestamp").parse().unwrap());
    let expected = skiplock::dispatch::signature::header(&[&hook.secret], id, timestamp, got.raw.as_bytes());
    assert_eq!(got.header("webhook-signature"), expected, "signed with the secret the consumer was given");

    // A rotated secret is sealed too, the one rotated out kept sealed beside it.
    let rotated =
        app.post(&format!("queues/{}/consumers/{}/rotate_secret", hook.queue, hook.consumer), json!({})).await;
    assert!(rotated.expect_ok()["signing_secret"].as_str().unwrap().starts_with("whsec_"));
    assert_eq!(secrets_in_the_clear(&pool).await, 0);

    // After a rotation to a key this dispatcher lacks, it signs nothing: the batch goes back untouched,
    // for a node with the key.
    let next = Keyring::new_key();
    let rotating = Keyring::new(Some(&next), std::slice::from_ref(&key)).unwrap();
    skiplock::engine::sealing::seal_at_rest(&pool, &rotating, Reseal::All).await.unwrap();
    app.publish(&hook.queue, json!({"body": "again", "content_type": "text"})).await;
    let consumer = webhook_consumer(&d, &hook).await;
    let started = std::time::Instant::now();
    let outcome = d.dispatch_once(&consumer).await.unwrap().expect("a batch");
    assert!(outcome.failure.unwrap_or_default().contains("does not have"));
    assert!(started.elapsed() >= Duration::from_secs(2), "held a while, not claimed again at once");
    assert_eq!(receiver.received().len(), 1);
    let d = dispatcher_with(&pool, Keyring::new(Some(&next), &[]).unwrap()).await;
    let consumer = webhook_consumer(&d, &hook).await;
    let outcome = d.dispatch_once(&consumer).await.unwrap().expect("a batch");
    assert_eq!((outcome.acked, receiver.received()[1].body["messages"][0]["attempts"].clone()), (1, json!(1)));
}

#[sqlx::test]
async fn a_rotation_moves_every_secret_to_the_new_key_and_a_node_without_it_refuses_to_start(pool: PgPool) {
    // Secrets stored in the clear, by a node without a key.
    let clear = spawn_app(pool.clone()).await;
    clear.webhook_queue("first", "http://127.0.0.1:9/hook", json!({})).await;
    let q = clear.pull_queue("work", json!({})).await;
    clear.publish_texts(&q, &["one", "two"]).await;
    let leased = clear.pull(&q, json!({"batch_size": 1})).await;
    assert!(secrets_in_the_clear(&pool).await > 0);

    // A node with a key seals them as it starts.
    let (old, new) = (Keyring::new_key(), Keyring::new_key());
    let sealed_by = spawn_app_with_args(pool.clone(), &["--secret-key", &old]).await;
    assert_eq!(secrets_in_the_clear(&pool).await, 0);
    sealed_by.webhook_queue("second", "http://127.0.0.1:9/hook", json!({})).await;

    // A node given the new key leaves the secrets under the old one as it starts: nodes not yet given the
    // new key still open them. The rotation, while the nodes run, moves every secret to the new key.
    let _both = spawn_app_with_args(pool.clone(), &["--secret-key", &new, "--previous-secret-keys", &old]).await;
    assert_eq!(sealed_under(&pool, &old).await, 2);
    let rotating = Keyring::new(Some(&new), std::slice::from_ref(&old)).unwrap();
    let sealed = skiplock::engine::sealing::seal_at_rest(&pool, &rotating, Reseal::All).await.unwrap();
    assert_eq!((sealed.consumers, sealed.lease_key), (2, true));
    assert_eq!(sealed_under(&pool, &new).await, 2);
    let again = skiplock::engine::sealing::seal_at_rest(&pool, &rotating, Reseal::All).await.unwrap();
    assert_eq!((again.consumers, again.lease_key), (0, false), "a second pass has nothing to do");

    // A node with the new key alone serves, and a lease given out before the rotation still acks.
    let node = spawn_app_with_args(pool.clone(), &["--secret-key", &new]).await;
    let after = TestApp::remote(pool.clone(), node.address.clone(), clear.account, clear.token.clone());
    assert_eq!(after.ack(&q, &[lease(&leased[0])], json!([])).await["ackCount"], json!(1));
    // Nodes that lack it refuse to start, saying which key they need.
    for args in [vec!["--secret-key", old.as_str()], vec![]] {
        let refused = try_start(&pool, &args).await.err().expect("the node refuses to start");
        assert!(refused.contains("sealed under key") && refused.contains("SKIPLOCK_SECRET_KEY"), "{refused}");
    }
    let bad = try_start(&pool, &["--secret-key", "c2hvcnQ="]).await.err().unwrap();
    assert!(bad.contains("32 bytes"), "{bad}");
}
