//! What wakes an idle dispatcher worker. A worker sleeps without polling until a notification (a
//! publish, a retry, a dead-lettering, a redrive, a consumer change on any node) or until the earliest
//! delayed or leased message of its queue is due. These dispatchers read their consumers only every
//! two minutes, so a delivery within the deadline came by the wake-up under test.

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use sqlx::PgPool;

use crate::helpers::{
    lease, listening_dispatcher as start_dispatcher, spawn_app, spawn_app_dispatching, wait_until_some, Hook,
    RunningDispatcher, TestApp,
};
use crate::receiver::{Answer, Receiver};

const DEADLINE: Duration = Duration::from_secs(10);

async fn queue_named(app: &TestApp, name: &str) -> String {
    app.get(&format!("queues?name={name}")).await.expect_ok()[0]["queue_id"].as_str().unwrap().to_owned()
}

/// A webhook queue sending each message at once to a receiver that acks it, with a dispatcher running.
async fn acked_queue(app: &TestApp, pool: &PgPool, name: &str) -> (Receiver, Hook, RunningDispatcher) {
    let receiver = Receiver::start(|_| Answer::status(200)).await;
    let hook = app.webhook_queue(name, &receiver.url, json!({"settings": {"max_wait_time_ms": 0}})).await;
    (receiver, hook, start_dispatcher(pool, Duration::from_secs(5)).await)
}

#[sqlx::test]
async fn a_delayed_message_is_delivered_when_its_delay_ends(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let (receiver, hook, running) = acked_queue(&app, &pool, "later").await;
    let sent = Instant::now();
    app.publish(&hook.queue, json!({"body": "soon", "content_type": "text", "delay_seconds": 2})).await;
    let got = receiver.wait_for(1, DEADLINE).await;
    assert!(got[0].at - sent >= Duration::from_secs(2), "delivered before its delay ended");
    running.stop().await;
}

/// A batch that took all that was ready sets the worker's timer from its own claim: a delayed message
/// published beside it, which wakes nobody when its delay ends, is delivered then.
#[sqlx::test]
async fn a_delayed_message_beside_a_delivered_one_is_delivered_when_its_delay_ends(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let (receiver, hook, running) = acked_queue(&app, &pool, "mixed").await;
    // One delivery first, so the worker has settled after its start-up looks and waits on its timer.
    app.publish_texts(&hook.queue, &["first"]).await;
    receiver.wait_for(1, DEADLINE).await;
    let sent = Instant::now();
    let messages = json!({"messages": [
        {"body": "now", "content_type": "text"},
        {"body": "soon", "content_type": "text", "delay_seconds": 2},
    ]});
    app.post(&format!("queues/{}/messages/batch", hook.queue), messages).await.expect_ok();
    let got = receiver.wait_for(3, DEADLINE).await;
    assert_eq!(got[1].body["messages"][0]["body"], "now");
    assert_eq!(got[2].body["messages"][0]["body"], "soon");
    assert!(got[2].at - sent >= Duration::from_secs(2), "delivered before its delay ended");
    running.stop().await;
}

#[sqlx::test]
async fn a_retried_message_comes_back_when_its_retry_delay_ends(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let receiver = Receiver::start(|r| match r.body["messages"][0]["attempts"].as_i64() {
        Some(1) => Answer::json(json!({"actions": [{"type": "retry_all", "delay_seconds": 1}]})),
        _ => Answer::status(200),
    })
    .await;
    let hook = app.webhook_queue("again", &receiver.url, json!({"settings": {"max_wait_time_ms": 0}})).await;
    let running = start_dispatcher(&pool, Duration::from_secs(5)).await;
    app.publish_texts(&hook.queue, &["twice"]).await;
    let got = receiver.wait_for(2, DEADLINE).await;
    assert_eq!(got[1].body["messages"][0]["attempts"], 2);
    assert!(got[1].at - got[0].at >= Duration::from_secs(1), "the retry waited its delay");
    running.stop().await;
}

/// A webhook queue whose one message ("orphaned") a node claimed and then died with, and when it
/// claimed it: a short receiver timeout gives that node's lease about five seconds.
async fn orphan_a_batch(app: &TestApp, pool: &PgPool) -> (Receiver, Hook, Instant) {
    let receiver = Receiver::start(|_| Answer::status(200)).await;
    let hook = app.webhook_queue("orphan", &receiver.url, json!({"settings": {"max_wait_time_ms": 0}})).await;
    app.publish_texts(&hook.queue, &["orphaned"]).await;
    let dead = crate::helpers::dispatcher(pool, Duration::from_millis(100)).await;
    let consumer = crate::helpers::webhook_consumer(&dead, &hook).await;
    let claimed_at = Instant::now();
    assert_eq!(dead.claim(&consumer).await.unwrap().messages.len(), 1);
    (receiver, hook, claimed_at)
}

/// A node claimed a batch and died before delivering it: another node's worker, asleep, delivers it
/// when the lease runs out.
#[sqlx::test]
async fn a_batch_whose_node_died_is_delivered_when_its_lease_runs_out(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let (receiver, _, claimed_at) = orphan_a_batch(&app, &pool).await;
    let running = start_dispatcher(&pool, Duration::from_secs(5)).await;
    let got = receiver.wait_for(1, DEADLINE).await;
    assert!(got[0].at - claimed_at >= Duration::from_secs(5), "delivered while the dead node's lease held");
    assert_eq!(got[0].body["messages"][0]["attempts"], 2);
    running.stop().await;
}

/// As above, with a delivery in between: the claim that delivered it also found the dead node's lease
/// and set the worker's timer for it.
#[sqlx::test]
async fn a_dead_nodes_batch_is_delivered_when_its_lease_runs_out_after_other_deliveries(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let (receiver, hook, claimed_at) = orphan_a_batch(&app, &pool).await;
    let running = start_dispatcher(&pool, Duration::from_secs(5)).await;
    // The second delivery's claim is the worker's last look before the lease runs out.
    for (delivered, body) in [(1, "first"), (2, "fresh")] {
        app.publish_texts(&hook.queue, &[body]).await;
        receiver.wait_for(delivered, DEADLINE).await;
    }
    let got = receiver.wait_for(3, DEADLINE).await;
    assert_eq!(got[2].body["messages"][0]["body"], "orphaned");
    assert!(got[2].at - claimed_at >= Duration::from_secs(5), "delivered while the dead node's lease held");
    running.stop().await;
}

#[sqlx::test]
async fn a_dead_lettered_message_wakes_the_dead_letter_queues_consumer(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let failing = Receiver::start(|_| Answer::status(500)).await;
    let dead_letters = Receiver::start(|_| Answer::status(200)).await;
    let settings = json!({"dead_letter_queue": "doomed-dlq", "settings": {"max_wait_time_ms": 0, "max_retries": 0}});
    let hook = app.webhook_queue("doomed", &failing.url, settings).await;
    // The dead-letter queue was made with the consumer that names it; it gets a webhook consumer too.
    let dlq = queue_named(&app, "doomed-dlq").await;
    let webhook = json!({"type": "webhook", "url": dead_letters.url, "settings": {"max_wait_time_ms": 0}});
    app.post(&format!("queues/{dlq}/consumers"), webhook).await.expect_ok();
    let running = start_dispatcher(&pool, Duration::from_secs(5)).await;
    app.publish_texts(&hook.queue, &["lost cause"]).await;
    let got = dead_letters.wait_for(1, DEADLINE).await;
    assert_eq!(got[0].body["queue"], "doomed-dlq");
    assert_eq!(failing.received().len(), 1);
    running.stop().await;
}

#[sqlx::test]
async fn a_redrive_wakes_the_consumer_of_the_queue_it_moves_to(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let source =
        app.pull_queue("source", json!({"dead_letter_queue": "source-dlq", "settings": {"max_retries": 0}})).await;
    app.publish_texts(&source, &["back"]).await;
    let pulled = app.pull(&source, json!({"visibility_timeout_ms": 60000})).await;
    app.ack(&source, &[], json!([{"lease_id": lease(&pulled[0])}])).await;
    let dlq = queue_named(&app, "source-dlq").await;
    assert_eq!(app.backlog(&dlq).await, 1, "the message was dead-lettered");
    // The source queue now pushes: its pull consumer is replaced by a webhook consumer.
    let consumers = app.get(&format!("queues/{source}/consumers")).await.expect_ok().clone();
    let pull_consumer = consumers[0]["consumer_id"].as_str().unwrap().to_owned();
    app.delete(&format!("queues/{source}/consumers/{pull_consumer}")).await.expect_ok();
    let receiver = Receiver::start(|_| Answer::status(200)).await;
    let webhook = json!({"type": "webhook", "url": receiver.url, "settings": {"max_wait_time_ms": 0}});
    app.post(&format!("queues/{source}/consumers"), webhook).await.expect_ok();
    let running = start_dispatcher(&pool, Duration::from_secs(5)).await;
    let redrive = app.post(&format!("queues/{dlq}/redrive"), json!({})).await;
    assert_eq!(redrive.status, 201, "{}", redrive.body);
    let got = receiver.wait_for(1, DEADLINE).await;
    assert_eq!(got[0].body["messages"][0]["body"], "back");
    running.stop().await;
}

#[sqlx::test]
async fn a_changed_consumer_delivers_to_its_new_url_at_once(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let before = Receiver::start(|_| Answer::status(200)).await;
    let after = Receiver::start(|_| Answer::status(200)).await;
    let hook = app.webhook_queue("moving", &before.url, json!({"settings": {"max_wait_time_ms": 0}})).await;
    let running = start_dispatcher(&pool, Duration::from_secs(5)).await;
    app.publish_texts(&hook.queue, &["first"]).await;
    before.wait_for(1, DEADLINE).await;
    let update = json!({"type": "webhook", "url": after.url, "settings": {"max_wait_time_ms": 0}});
    app.put(&format!("queues/{}/consumers/{}", hook.queue, hook.consumer), update).await.expect_ok();
    // The change reaches the dispatcher by notification; until it has, a publish may still go to the
    // old URL, so publish until one arrives at the new one.
    let deadline = Instant::now() + DEADLINE;
    while after.received().is_empty() {
        assert!(Instant::now() < deadline, "the changed URL was not noticed");
        app.publish_texts(&hook.queue, &["next"]).await;
        let seen = before.received().len() + after.received().len();
        while before.received().len() + after.received().len() == seen {
            assert!(Instant::now() < deadline, "a publish was not delivered");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    running.stop().await;
}

/// A consumer deleted and made again (with another URL) on another node: the dispatcher drops the old
/// worker and starts one for the new consumer, by the notices alone.
#[sqlx::test]
async fn a_consumer_deleted_and_made_again_delivers_to_the_new_one(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let old = Receiver::start(|_| Answer::status(200)).await;
    let new = Receiver::start(|_| Answer::status(200)).await;
    let hook = app.webhook_queue("renewed", &old.url, json!({"settings": {"max_wait_time_ms": 0}})).await;
    let running = start_dispatcher(&pool, Duration::from_secs(5)).await;
    app.publish_texts(&hook.queue, &["one"]).await;
    old.wait_for(1, DEADLINE).await;
    app.delete(&format!("queues/{}/consumers/{}", hook.queue, hook.consumer)).await.expect_ok();
    let webhook = json!({"type": "webhook", "url": new.url, "settings": {"max_wait_time_ms": 0}});
    app.post(&format!("queues/{}/consumers", hook.queue), webhook).await.expect_ok();
    app.publish_texts(&hook.queue, &["two"]).await;
    let got = new.wait_for(1, DEADLINE).await;
    assert_eq!(got[0].body["messages"][0]["body"], "two");
    running.stop().await;
    assert_eq!(old.received().len(), 1, "the deleted consumer got nothing more");
}

/// Publishes on this node that woke `to` ("this_node": its own worker, in-process; "all_nodes": NOTIFY;
/// "leased_by_publish": its own worker took the messages leased by the publish).
fn publish_wakeups(app: &TestApp, to: &str) -> u64 {
    app.metrics.publish_wakeups.with_label_values(&[to]).get()
}

/// Settings under which a worker claims as soon as a message is published, but takes nothing leased by
/// the publish (it has a batching wait, which a batch of one message ends).
fn claims_when_woken() -> Value {
    json!({"settings": {"max_wait_time_ms": 1000, "batch_size": 1}})
}

/// A node that runs the dispatcher too wakes its own worker in-process when that worker claims at
/// once, and sends no notification: the message is delivered all the same.
#[sqlx::test]
async fn a_publish_wakes_its_own_nodes_worker_in_process(pool: PgPool) {
    let app = spawn_app_dispatching(pool.clone()).await;
    let receiver = Receiver::start(|_| Answer::status(200)).await;
    let hook = app.webhook_queue("here", &receiver.url, claims_when_woken()).await;
    // The first publish may come before the node's worker for the new consumer runs.
    app.publish_texts(&hook.queue, &["first"]).await;
    receiver.wait_for(1, DEADLINE).await;
    let (here, everywhere) = (publish_wakeups(&app, "this_node"), publish_wakeups(&app, "all_nodes"));
    app.publish_texts(&hook.queue, &["second"]).await;
    let got = receiver.wait_for(2, DEADLINE).await;
    assert_eq!(got[1].body["messages"][0]["body"], "second");
    assert_eq!(publish_wakeups(&app, "this_node"), here + 1, "the node's own worker was not woken in-process");
    assert_eq!(publish_wakeups(&app, "all_nodes"), everywhere, "a notification was sent all the same");
    app.stop_node();
}

/// A worker with no room for another batch (its consumer's one delivery at a time is in flight) is not
/// woken in-process: the publish notifies every node, and the message comes once the delivery ends.
#[sqlx::test]
async fn a_publish_beside_a_busy_worker_notifies_every_node(pool: PgPool) {
    let app = spawn_app_dispatching(pool.clone()).await;
    let receiver = Receiver::start(|r| {
        let slow = r.body["messages"][0]["body"] == "slow";
        Answer { delay: Duration::from_millis(if slow { 1500 } else { 0 }), ..Answer::status(200) }
    })
    .await;
    let settings = json!({"settings": {"max_wait_time_ms": 0, "max_concurrency": 1}});
    let hook = app.webhook_queue("busy", &receiver.url, settings).await;
    app.publish_texts(&hook.queue, &["slow"]).await;
    receiver.wait_for(1, DEADLINE).await;
    let everywhere = publish_wakeups(&app, "all_nodes");
    app.publish_texts(&hook.queue, &["next"]).await;
    assert_eq!(publish_wakeups(&app, "all_nodes"), everywhere + 1, "a busy worker was woken alone");
    let got = receiver.wait_for(2, DEADLINE).await;
    assert_eq!(got[1].body["messages"][0]["body"], "next");
    app.stop_node();
}

/// A node's worker woken in-process by a publish, stopped before it could claim (its claim failed:
/// the database ended its connection while the node was stopping), hands the wake-up to the other
/// nodes: another node's worker, asleep and reading its consumers only every two minutes, delivers.
#[sqlx::test]
async fn a_worker_stopped_before_claiming_what_woke_it_leaves_it_to_the_other_nodes(pool: PgPool) {
    let node = spawn_app_dispatching(pool.clone()).await;
    let receiver = Receiver::start(|_| Answer::status(200)).await;
    let hook = node.webhook_queue("handed", &receiver.url, claims_when_woken()).await;
    let other = start_dispatcher(&pool, Duration::from_secs(5)).await;
    // Deliveries until one was woken in-process: the node's worker runs and has room.
    let deadline = Instant::now() + DEADLINE;
    for warm in 1.. {
        let here = publish_wakeups(&node, "this_node");
        node.publish_texts(&hook.queue, &["warm"]).await;
        receiver.wait_for(warm, DEADLINE).await;
        if publish_wakeups(&node, "this_node") > here {
            break;
        }
        assert!(Instant::now() < deadline, "no publish woke the node's own worker");
    }
    let delivered = receiver.received().len();
    // Once no node holds a slot (idle ones go back), the worker's next claim takes one from the database
    // and waits on this lock; the other publish then finds the worker still claiming, and leaves it a
    // wake-up it never takes.
    let idle = "select count(*) from (select 1 where not exists (
                    select 1 from dispatch_slots where holder is not null)) t";
    wait_until_some(&pool, idle, "the nodes kept their idle slots").await;
    let mut lock = pool.begin().await.unwrap();
    sqlx::query("lock table dispatch_slots in exclusive mode").execute(&mut *lock).await.unwrap();
    let here = publish_wakeups(&node, "this_node");
    node.publish_texts(&hook.queue, &["one"]).await;
    let claim_waiting = "select count(*) from pg_stat_activity
         where datname = current_database() and wait_event_type = 'Lock' and query like 'update dispatch_slots%'";
    wait_until_some(&pool, claim_waiting, "the worker's claim did not wait on the lock").await;
    node.publish_texts(&hook.queue, &["two"]).await;
    assert_eq!(publish_wakeups(&node, "this_node"), here + 2);
    node.stop_node();
    // The node's listener gone: the node's stop has reached its tasks, the worker's loop among them.
    let stopped = "select count(*) from (select 1 from pg_stat_activity
                   where datname = current_database() and query like 'LISTEN%skiplock_changes%' having count(*) = 1) t";
    wait_until_some(&pool, stopped, "the node did not stop").await;
    let ended = "select count(*) from (select pg_terminate_backend(pid) from pg_stat_activity
                 where datname = current_database() and wait_event_type = 'Lock' and query like 'update dispatch_slots%') t";
    sqlx::query(ended).execute(&pool).await.unwrap();
    lock.rollback().await.unwrap();
    let mut bodies: Vec<Value> = Vec::new();
    for deliveries in delivered + 1.. {
        let got = receiver.wait_for(deliveries, DEADLINE).await;
        bodies = got[delivered..].iter().flat_map(|r| r.body["messages"].as_array().unwrap().clone()).collect();
        if bodies.len() >= 2 {
            break;
        }
    }
    let bodies: Vec<&str> = bodies.iter().map(|m| m["body"].as_str().unwrap()).collect();
    assert_eq!(bodies, ["one", "two"]);
    other.stop().await;
}

/// A node's worker that waits with a slot to spare and no batching wait takes the messages of a publish
/// on its node leased by the statement that stores them: nothing is woken, nothing claimed, and the
/// message arrives as its first delivery.
#[sqlx::test]
async fn a_publish_leases_its_messages_for_its_own_nodes_waiting_worker(pool: PgPool) {
    let app = spawn_app_dispatching(pool.clone()).await;
    let receiver = Receiver::start(|_| Answer::status(200)).await;
    let hook = app.webhook_queue("leased", &receiver.url, json!({"settings": {"max_wait_time_ms": 0}})).await;
    // Until the node's worker for the new consumer runs and waits, publishes wake it or notify.
    let deadline = Instant::now() + DEADLINE;
    for sent in 1.. {
        let count = |app: &TestApp| ["leased_by_publish", "this_node", "all_nodes"].map(|to| publish_wakeups(app, to));
        let before = count(&app);
        let body = format!("message {sent}");
        app.publish_texts(&hook.queue, &[body.as_str()]).await;
        let got = receiver.wait_for(sent, DEADLINE).await;
        let after = count(&app);
        if after[0] > before[0] {
            assert_eq!(after, [before[0] + 1, before[1], before[2]], "the leased publish woke a worker as well");
            let message = &got[sent - 1].body["messages"][0];
            assert_eq!((message["body"].as_str(), message["attempts"].as_i64()), (Some(body.as_str()), Some(1)));
            break;
        }
        assert!(Instant::now() < deadline, "no publish leased its message for the node's worker");
    }
    app.stop_node();
}

/// Messages a publish leased for a worker that stopped before they were handed to it go back to the
/// queue at once, and their slot to the worker's pool: another node delivers them long before their
/// lease would end.
#[sqlx::test]
async fn messages_leased_for_a_worker_that_stopped_are_given_back_at_once(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    let (receiver, hook, running) = acked_queue(&app, &pool, "given-back").await;
    app.publish_texts(&hook.queue, &["first"]).await;
    receiver.wait_for(1, DEADLINE).await;
    // This node (API only) is made to believe it has a worker for the queue holding two free slots,
    // leasing for ten minutes.
    let queue: skiplock::ids::QueueId = hook.queue.parse().unwrap();
    let consumer: skiplock::ids::ConsumerId = hook.consumer.parse().unwrap();
    let slots = std::sync::Arc::new(skiplock::engine::slots::SlotPool::new(consumer));
    for slot in [0, 1] {
        slots.taken(slot);
        slots.put_back(slot);
    }
    let (hand, mut handed) = tokio::sync::mpsc::unbounded_channel();
    let terms = skiplock::store::publish::LeaseOffer { queue, consumer, slot: -1, lease_ms: 600_000, batch_size: 10 };
    let offer = skiplock::engine::wakeups::Offer { terms, slots: slots.clone(), hand };
    app.wakeups.claims_here(queue, true, Some(offer));
    app.publish_texts(&hook.queue, &["kept"]).await;
    let kept = handed.recv().await.expect("the publish leased its message for the offering worker");
    assert_eq!(kept.messages.len(), 1);
    // The worker stops; the next publish leases for it all the same, and finds it gone.
    drop(handed);
    app.publish_texts(&hook.queue, &["given back"]).await;
    let got = receiver.wait_for(2, DEADLINE).await;
    let message = &got[1].body["messages"][0];
    assert_eq!((message["body"].as_str(), message["attempts"].as_i64()), (Some("given back"), Some(1)));
    // The slot set aside for the messages given back is free again; the kept batch's is still in use.
    assert!(slots.take_free(10).is_some() && slots.take_free(10).is_none(), "one slot free again");
    running.stop().await;
}

/// A node holds the dispatch slot a batch took: it renews the slot's row while a slow receiver holds the
/// batch, and gives the slot back once it has lain idle, for other nodes.
#[sqlx::test]
async fn a_node_renews_the_slot_of_a_long_delivery_and_gives_it_back_once_idle(pool: PgPool) {
    let app = spawn_app(pool.clone()).await;
    // One answer in 9.5 s, within the 10 s timeout: a timeout retried would hold the slot on and on.
    let receiver = Receiver::start(|_| Answer { delay: Duration::from_millis(9_500), ..Answer::status(200) }).await;
    let hook = app.webhook_queue("slow", &receiver.url, json!({"settings": {"max_wait_time_ms": 0}})).await;
    // A 10 s timeout holds a slot for 25 s at a time (two timeouts and 5 s), renewed every third of that,
    // so once while the answer is awaited.
    let running = start_dispatcher(&pool, Duration::from_secs(10)).await;
    app.publish_texts(&hook.queue, &["slow"]).await;
    let held = "select count(*) from dispatch_slots where holder is not null";
    wait_until_some(&pool, held, "no slot was taken for the batch").await;
    let (first,): (chrono::DateTime<chrono::Utc>,) =
        sqlx::query_as("select held_until from dispatch_slots where holder is not null")
            .fetch_one(&pool)
            .await
            .unwrap();
    let renewed = format!(
        "select count(*) from dispatch_slots where holder is not null and held_until > '{}'",
        first.to_rfc3339()
    );
    wait_until_some(&pool, &renewed, "the slot of the batch still out was not renewed").await;
    receiver.wait_for(1, DEADLINE).await;
    let given_back = "select count(*) from (select 1 where not exists (
                          select 1 from dispatch_slots where holder is not null)) t";
    wait_until_some(&pool, given_back, "the idle slot was not given back").await;
    running.stop().await;
}
