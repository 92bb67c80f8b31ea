//! Event subscriptions, scoped by account, and the event outbox: events recorded in the transaction of
//! what caused them (one row per subscription they match), and taken out by the node that publishes them
//! into their destination queues in a transaction of its own.

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::postgres::PgRow;
use sqlx::{PgConnection, PgExecutor, PgPool, Row};
use uuid::Uuid;

use crate::ids::{AccountId, QueueId, SubscriptionId};
use crate::store::owned::OwnedQueue;

/// A subscription as stored, with its source queue's name.
#[derive(Debug, Clone)]
pub struct Subscription {
    pub id: SubscriptionId,
    pub account: AccountId,
    pub name: String,
    pub enabled: bool,
    pub source_type: String,
    pub queue: Option<OwnedQueue>,
    pub queue_name: Option<String>,
    pub backlog_threshold: Option<i64>,
    pub events: Vec<String>,
    pub destination: OwnedQueue,
    pub created_at: DateTime<Utc>,
    pub modified_at: DateTime<Utc>,
}

/// What a subscription is made or changed to; its source is set once.
pub struct SubscriptionFields<'a> {
    pub name: &'a str,
    pub enabled: bool,
    pub events: &'a [String],
    pub destination: QueueId,
}

/// A subscription's columns, its source queue's name joined (`s`, `q`).
macro_rules! columns {
    () => {
        "s.id, s.account_id, s.name, s.enabled, s.source_type, s.queue_id, q.name as queue_name, s.backlog_threshold, \
         s.events, s.destination_queue_id, s.created_at, s.modified_at"
    };
}

fn subscription(row: PgRow) -> Subscription {
    let account = AccountId(row.get("account_id"));
    Subscription {
        id: SubscriptionId(row.get("id")),
        account,
        name: row.get("name"),
        enabled: row.get("enabled"),
        source_type: row.get("source_type"),
        queue: row.get::<Option<Uuid>, _>("queue_id").map(|q| OwnedQueue::vouched(account, QueueId(q))),
        queue_name: row.get("queue_name"),
        backlog_threshold: row.get("backlog_threshold"),
        events: row.get("events"),
        destination: OwnedQueue::vouched(account, QueueId(row.get("destination_queue_id"))),
        created_at: row.get("created_at"),
        modified_at: row.get("modified_at"),
    }
}

/// Stores a new subscription of the account's: to the events of `queue` (None: every queue of it).
pub async fn create(
    pool: &PgPool,
    account: AccountId,
    source_type: &str,
    queue: Option<OwnedQueue>,
    backlog_threshold: Option<i64>,
    fields: &SubscriptionFields<'_>,
) -> Result<Subscription, sqlx::Error> {
    let statement = concat!(
        "with s as (
             insert into event_subscriptions (id, account_id, name, enabled, source_type, queue_id, backlog_threshold,
                                              events, destination_queue_id)
             values ($1, $2, $3, $4, $5, $6, $7, $8, $9)
             returning *)
         select ",
        columns!(),
        " from s left join queues q on q.id = s.queue_id and q.account_id = s.account_id"
    );
    sqlx::query(statement)
        .bind(SubscriptionId::new().0)
        .bind(account.0)
        .bind(fields.name)
        .bind(fields.enabled)
        .bind(source_type)
        .bind(queue.map(|q| q.id().0))
        .bind(backlog_threshold)
        .bind(fields.events)
        .bind(fields.destination.0)
        .fetch_one(pool)
        .await
        .map(subscription)
}

/// Changes the account's subscription (its threshold goes with the backlog event); None when it has no
/// such subscription.
pub async fn update(
    pool: &PgPool,
    account: AccountId,
    id: SubscriptionId,
    fields: &SubscriptionFields<'_>,
    backlog_threshold: Option<i64>,
) -> Result<Option<Subscription>, sqlx::Error> {
    let statement = concat!(
        "with s as (
             update event_subscriptions set name = $3, enabled = $4, events = $5, destination_queue_id = $6,
                    backlog_threshold = $7, over_threshold = over_threshold and $7 is not null, modified_at = now()
             where account_id = $1 and id = $2
             returning *)
         select ",
        columns!(),
        " from s left join queues q on q.id = s.queue_id and q.account_id = s.account_id"
    );
    sqlx::query(statement)
        .bind(account.0)
        .bind(id.0)
        .bind(fields.name)
        .bind(fields.enabled)
        .bind(fields.events)
        .bind(fields.destination.0)
        .bind(backlog_threshold)
        .fetch_optional(pool)
        .await
        .map(|row| row.map(subscription))
}

pub async fn get(pool: &PgPool, account: AccountId, id: SubscriptionId) -> Result<Option<Subscription>, sqlx::Error> {
    let statement = concat!(
        "select ",
        columns!(),
        " from event_subscriptions s left join queues q on q.id = s.queue_id and q.account_id = s.account_id
         where s.account_id = $1 and s.id = $2"
    );
    sqlx::query(statement).bind(account.0).bind(id.0).fetch_optional(pool).await.map(|row| row.map(subscription))
}

/// Every subscription of the account (at most `engine::events::MAX_SUBSCRIPTIONS_PER_ACCOUNT`), oldest first.
pub async fn all(pool: &PgPool, account: AccountId) -> Result<Vec<Subscription>, sqlx::Error> {
    let statement = concat!(
        "select ",
        columns!(),
        " from event_subscriptions s left join queues q on q.id = s.queue_id and q.account_id = s.account_id
         where s.account_id = $1 order by s.created_at, s.id"
    );
    let rows = sqlx::query(statement).bind(account.0).fetch_all(pool).await?;
    Ok(rows.into_iter().map(subscription).collect())
}

/// How many subscriptions the account has.
pub async fn count(pool: &PgPool, account: AccountId) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar("select count(*) from event_subscriptions where account_id = $1")
        .bind(account.0)
        .fetch_one(pool)
        .await
}

/// Deletes the account's subscription (its events not yet published with it), answering it as it was.
pub async fn delete(
    pool: &PgPool,
    account: AccountId,
    id: SubscriptionId,
) -> Result<Option<Subscription>, sqlx::Error> {
    let statement = concat!(
        "with s as (delete from event_subscriptions where account_id = $1 and id = $2 returning *)
         select ",
        columns!(),
        " from s left join queues q on q.id = s.queue_id and q.account_id = s.account_id"
    );
    sqlx::query(statement).bind(account.0).bind(id.0).fetch_optional(pool).await.map(|row| row.map(subscription))
}

/// An event to record: what happened to which queue of which account (a queue not of that account
/// records nothing).
#[derive(Debug, Clone)]
pub struct NewEvent {
    pub account: AccountId,
    pub queue: QueueId,
    pub event: &'static str,
    pub payload: Value,
}

/// Records `events` for every enabled subscription of their account that asks for them, on `db` (the
/// transaction of what caused them); answers how many rows it wrote. A queue's events never go into that
/// queue itself (an account-wide source covers its destination too): each could cause another.
pub async fn record(db: impl PgExecutor<'_>, events: &[NewEvent]) -> Result<u64, sqlx::Error> {
    if events.is_empty() {
        return Ok(0);
    }
    let done = sqlx::query(
        "insert into event_outbox (account_id, subscription_id, destination_queue_id, event, queue_id, queue_name,
                                   payload)
         select s.account_id, s.id, s.destination_queue_id, e.event, e.queue_id, q.name, e.payload
         from unnest($1::uuid[], $2::uuid[], $3::text[], $4::jsonb[]) with ordinality
              as e(account_id, queue_id, event, payload, i)
         join queues q on q.id = e.queue_id and q.account_id = e.account_id
         join event_subscriptions s on s.account_id = e.account_id and s.enabled and e.event = any(s.events)
                                    and (s.queue_id is null or s.queue_id = e.queue_id)
                                    and s.destination_queue_id <> e.queue_id
         order by e.i, s.id",
    )
    .bind(events.iter().map(|e| e.account.0).collect::<Vec<_>>())
    .bind(events.iter().map(|e| e.queue.0).collect::<Vec<_>>())
    .bind(events.iter().map(|e| e.event).collect::<Vec<_>>())
    .bind(events.iter().map(|e| e.payload.clone()).collect::<Vec<_>>())
    .execute(db)
    .await?;
    Ok(done.rows_affected())
}

/// Records `redrive.finished` for the redrive `task` if it is finished (completed, failed or cancelled), in
/// the transaction that finished it.
pub async fn record_redrive_finished(conn: &mut PgConnection, task: Uuid) -> Result<u64, sqlx::Error> {
    let done = sqlx::query(
        "insert into event_outbox (account_id, subscription_id, destination_queue_id, event, queue_id, queue_name,
                                   payload)
         select s.account_id, s.id, s.destination_queue_id, 'redrive.finished', t.queue_id, q.name,
                jsonb_build_object('redriveId', replace(t.id::text, '-', ''), 'status', t.status,
                                   'moved', t.moved, 'stayed', t.stayed, 'error', t.error)
         from redrive_tasks t
         join queues q on q.id = t.queue_id and q.account_id = t.account_id
         join event_subscriptions s on s.account_id = t.account_id and s.enabled
                                    and 'redrive.finished' = any(s.events)
                                    and (s.queue_id is null or s.queue_id = t.queue_id)
                                    and s.destination_queue_id <> t.queue_id
         where t.id = $1 and t.finished_at is not null
         order by s.id",
    )
    .bind(task)
    .execute(conn)
    .await?;
    Ok(done.rows_affected())
}

/// Looks at the backlog of each enabled subscription with a threshold that no other node is looking at:
/// one that rose over it fires `backlog.over_threshold` once, in the same statement that marks it fired;
/// one that fell back to the threshold or under re-arms. Answers how many fired.
pub async fn check_backlogs(pool: &PgPool) -> Result<u64, sqlx::Error> {
    let done = sqlx::query(
        "with checked as (
             select s.id, coalesce(b.messages, 0) as messages
             from event_subscriptions s left join queue_backlogs b on b.queue_id = s.queue_id
             where s.enabled and s.backlog_threshold is not null
             for update of s skip locked),
         flipped as (
             update event_subscriptions s set over_threshold = c.messages > s.backlog_threshold
             from checked c
             where s.id = c.id and s.over_threshold <> (c.messages > s.backlog_threshold)
             returning s.id, s.account_id, s.queue_id, s.destination_queue_id, s.over_threshold, s.backlog_threshold,
                       c.messages)
         insert into event_outbox (account_id, subscription_id, destination_queue_id, event, queue_id, queue_name,
                                   payload)
         select f.account_id, f.id, f.destination_queue_id, 'backlog.over_threshold', f.queue_id, q.name,
                jsonb_build_object('backlog', f.messages, 'threshold', f.backlog_threshold)
         from flipped f join queues q on q.id = f.queue_id and q.account_id = f.account_id
         where f.over_threshold",
    )
    .execute(pool)
    .await?;
    Ok(done.rows_affected())
}

/// Disables the webhook consumers whose endpoint has failed for their `disable_after_hours`, recording
/// `consumer.disabled` in the same statement; answers the queues of those disabled, whose dispatchers must
/// let them go. Consumers of every account: the maintenance's.
pub async fn disable_failing(pool: &PgPool) -> Result<Vec<QueueId>, sqlx::Error> {
    let queues: Vec<Uuid> = sqlx::query_scalar(
        "with disabled as (
             update webhook_health h set disabled_at = now()
             from consumers c
             where c.id = h.consumer_id and c.account_id = h.account_id and c.disable_after_hours is not null
               and h.disabled_at is null and h.consecutive_failures > 0
               and h.failing_since < now() - make_interval(hours => c.disable_after_hours)
             returning h.consumer_id, h.account_id, c.queue_id, h.consecutive_failures, h.failing_since,
                       c.disable_after_hours),
         recorded as (
             insert into event_outbox (account_id, subscription_id, destination_queue_id, event, queue_id,
                                       queue_name, payload)
             select s.account_id, s.id, s.destination_queue_id, 'consumer.disabled', d.queue_id, q.name,
                    jsonb_build_object('consumerId', replace(d.consumer_id::text, '-', ''),
                                       'consecutiveFailures', d.consecutive_failures,
                                       'failingSince', to_char(d.failing_since at time zone 'UTC',
                                                               'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'),
                                       'disableAfterHours', d.disable_after_hours)
             from disabled d
             join queues q on q.id = d.queue_id and q.account_id = d.account_id
             join event_subscriptions s on s.account_id = d.account_id and s.enabled
                                        and 'consumer.disabled' = any(s.events)
                                        and (s.queue_id is null or s.queue_id = d.queue_id)
                                        and s.destination_queue_id <> d.queue_id)
         select distinct queue_id from disabled",
    )
    .fetch_all(pool)
    .await?;
    Ok(queues.into_iter().map(QueueId).collect())
}

/// An event recorded and not yet published.
#[derive(Debug, Clone)]
pub struct PendingEvent {
    pub id: i64,
    pub subscription_id: SubscriptionId,
    pub destination: OwnedQueue,
    pub event: String,
    /// The queue it happened to, as named then; None for an event of the account.
    pub queue: Option<(QueueId, String)>,
    pub payload: Value,
    pub occurred_at: DateTime<Utc>,
}

/// Records that `account` used `percent` (80 or 100) of `quota` in the period from `period_start`, and
/// the event `event` for every enabled subscription of the account's queues as a whole that asks for it,
/// in one statement: once per account, quota, period and percent, whichever node saw it first. Answers
/// whether this call recorded it.
pub async fn record_quota(
    pool: &PgPool,
    account: AccountId,
    quota: &str,
    period_start: DateTime<Utc>,
    percent: i16,
    event: &str,
    payload: &Value,
) -> Result<bool, sqlx::Error> {
    let noticed: Option<bool> = sqlx::query_scalar(
        "with noticed as (
             insert into quota_notices (account_id, quota, period_start, percent) values ($1, $2, $3, $4)
             on conflict do nothing returning account_id),
         recorded as (
             insert into event_outbox (account_id, subscription_id, destination_queue_id, event, queue_id,
                                       queue_name, payload)
             select s.account_id, s.id, s.destination_queue_id, $5, null, null, $6
             from event_subscriptions s join noticed n on n.account_id = s.account_id
             where s.enabled and $5 = any(s.events) and s.queue_id is null
             order by s.id)
         select true from noticed",
    )
    .bind(account)
    .bind(quota)
    .bind(period_start)
    .bind(percent)
    .bind(event)
    .bind(payload)
    .fetch_optional(pool)
    .await?;
    Ok(noticed.is_some())
}

/// Forgets the quota crossings recorded before `before` (their periods are over).
pub async fn forget_quota_notices(pool: &PgPool, before: DateTime<Utc>) -> Result<u64, sqlx::Error> {
    let gone = sqlx::query("delete from quota_notices where period_start < $1").bind(before).execute(pool).await?;
    Ok(gone.rows_affected())
}

/// Whether any recorded event waits to be published.
pub async fn any_pending(pool: &PgPool) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar("select exists (select 1 from event_outbox)").fetch_one(pool).await
}

/// Takes up to `limit` recorded events, oldest first, that no other node is taking, deleting them in the
/// caller's transaction: they are gone only if it commits, with what it published.
pub async fn take(conn: &mut PgConnection, limit: i64) -> Result<Vec<PendingEvent>, sqlx::Error> {
    let rows = sqlx::query(
        "delete from event_outbox
         where id = any(array(select id from event_outbox order by id limit $1 for update skip locked))
         returning id, account_id, subscription_id, destination_queue_id, event, queue_id, queue_name, payload,
                   occurred_at",
    )
    .bind(limit)
    .fetch_all(conn)
    .await?;
    let mut taken: Vec<PendingEvent> = rows
        .into_iter()
        .map(|row| PendingEvent {
            id: row.get("id"),
            subscription_id: SubscriptionId(row.get("subscription_id")),
            destination: OwnedQueue::vouched(
                AccountId(row.get("account_id")),
                QueueId(row.get("destination_queue_id")),
            ),
            event: row.get("event"),
            queue: row
                .get::<Option<Uuid>, _>("queue_id")
                .map(|id| (QueueId(id), row.get::<Option<String>, _>("queue_name").unwrap_or_default())),
            payload: row.get("payload"),
            occurred_at: row.get("occurred_at"),
        })
        .collect();
    taken.sort_by_key(|e| e.id);
    Ok(taken)
}
