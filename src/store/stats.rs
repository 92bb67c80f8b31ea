//! Queue statistics for the dashboard: message counts by state, and activity over time.

use chrono::{DateTime, Utc};
use sqlx::PgPool;
use uuid::Uuid;

use crate::ids::{AccountId, QueueId};
use crate::store::owned::OwnedQueue;

#[derive(Debug, Clone)]
pub struct QueueState {
    pub queue_id: QueueId,
    pub queue_name: String,
    pub backlog_count: i64,
    pub backlog_bytes: i64,
    /// Leased and not yet expired.
    pub in_flight_count: i64,
    /// Waiting for a publish or retry delay.
    pub delayed_count: i64,
    pub oldest: Option<DateTime<Utc>>,
    /// The consumer's dead-letter queue, by name ("" when none).
    pub dead_letter_queue: String,
    /// The dead-letter queue's backlog; None when it names no queue of the account.
    pub dead_letter_backlog_count: Option<i64>,
    /// Ordering keys with messages in the queue.
    pub ordering_key_count: i64,
    /// Flow keys holding messages back by their limits, and the messages they hold.
    pub flow_keys_waiting: i64,
    pub flow_waiting_count: i64,
}

/// The counts of the queues a `chosen` statement picks (`queue_page` and `queue_state` differ only in it;
/// each is written out in full, so that `query_as!` checks it). Every lookup goes by the chosen queues'
/// ids and names, so the cost follows how many are chosen, not how many queues there are.
///
/// One page of the account's queues by name (`per_page` of them, from the `page`th, counting from 1)
/// and how many the account has. The page is read off the account's name index.
pub async fn queue_page(
    pool: &PgPool,
    account: AccountId,
    page: i64,
    per_page: i64,
) -> Result<(Vec<QueueState>, i64), sqlx::Error> {
    let states = sqlx::query_as!(
        QueueState,
        r#"with chosen as (
                  select id, account_id, name from queues where account_id = $1 and parent_queue_id is null
                  order by name limit $2 offset $3),
              named as (
                  select q.id, q.account_id, q.name, coalesce(c.dead_letter_queue, '') as dead_letter_queue,
                         d.id as dead_letter_id
                  from chosen q
                  left join consumers c on c.queue_id = q.id
                  left join queues d on d.account_id = q.account_id and d.name = c.dead_letter_queue),
              backlogs as (
                  select queue_id, messages, bytes, oldest from queue_backlogs
                  where queue_id = any(array(select id from named union all select dead_letter_id from named)))
         select q.id as "queue_id!: QueueId", q.name as "queue_name!",
                coalesce(b.messages, 0) as "backlog_count!", coalesce(b.bytes, 0) as "backlog_bytes!",
                f.in_flight_count as "in_flight_count!", f.delayed_count as "delayed_count!", b.oldest as "oldest?",
                q.dead_letter_queue as "dead_letter_queue!",
                case when q.dead_letter_id is not null then coalesce(d.messages, 0) end as "dead_letter_backlog_count?",
                (select count(*) from ordering_keys h where h.queue_id = q.id) as "ordering_key_count!",
                w.flow_keys_waiting as "flow_keys_waiting!", w.flow_waiting_count as "flow_waiting_count!"
         from named q
         left join backlogs b on b.queue_id = q.id
         left join backlogs d on d.queue_id = q.dead_letter_id
         -- Only messages whose availability lies ahead: a walk along the claim index, not the queue.
         -- Parked messages of ordering keys (at 'infinity') wait for their key, not for a time.
         cross join lateral (
             select (select count(*) from messages m where m.running and m.queue_id = q.id) as in_flight_count,
                    (select count(*) from messages m
                     where m.queue_id = q.id and not m.running and m.available_at > now()
                       and m.available_at < 'infinity') as delayed_count) f
         -- Flow keys holding messages back, and how many (their state rows, not the messages).
         cross join lateral (
             select count(*) filter (where k.held > 0) as flow_keys_waiting,
                    coalesce(sum(k.held), 0)::int8 as flow_waiting_count
             from flow_keys k where k.queue_id = q.id) w
         order by q.name"#,
        account.0,
        per_page,
        (page - 1) * per_page,
    )
    .fetch_all(pool)
    .await?;
    let total = super::queues::count(pool, account).await?;
    Ok((states, total))
}

/// One queue's counts, if the account has it.
pub async fn queue_state(pool: &PgPool, queue: OwnedQueue) -> Result<Option<QueueState>, sqlx::Error> {
    sqlx::query_as!(
        QueueState,
        r#"with chosen as (
                  select id, account_id, name from queues where account_id = $1 and id = $2),
              named as (
                  select q.id, q.account_id, q.name, coalesce(c.dead_letter_queue, '') as dead_letter_queue,
                         d.id as dead_letter_id
                  from chosen q
                  left join consumers c on c.queue_id = q.id
                  left join queues d on d.account_id = q.account_id and d.name = c.dead_letter_queue),
              backlogs as (
                  select queue_id, messages, bytes, oldest from queue_backlogs
                  where queue_id = any(array(select id from named union all select dead_letter_id from named)))
         select q.id as "queue_id!: QueueId", q.name as "queue_name!",
                coalesce(b.messages, 0) as "backlog_count!", coalesce(b.bytes, 0) as "backlog_bytes!",
                f.in_flight_count as "in_flight_count!", f.delayed_count as "delayed_count!", b.oldest as "oldest?",
                q.dead_letter_queue as "dead_letter_queue!",
                case when q.dead_letter_id is not null then coalesce(d.messages, 0) end as "dead_letter_backlog_count?",
                (select count(*) from ordering_keys h where h.queue_id = q.id) as "ordering_key_count!",
                w.flow_keys_waiting as "flow_keys_waiting!", w.flow_waiting_count as "flow_waiting_count!"
         from named q
         left join backlogs b on b.queue_id = q.id
         left join backlogs d on d.queue_id = q.dead_letter_id
         -- Only messages whose availability lies ahead: a walk along the claim index, not the queue.
         -- Parked messages of ordering keys (at 'infinity') wait for their key, not for a time.
         cross join lateral (
             select (select count(*) from messages m where m.running and m.queue_id = q.id) as in_flight_count,
                    (select count(*) from messages m
                     where m.queue_id = q.id and not m.running and m.available_at > now()
                       and m.available_at < 'infinity') as delayed_count) f
         -- Flow keys holding messages back, and how many (their state rows, not the messages).
         cross join lateral (
             select count(*) filter (where k.held > 0) as flow_keys_waiting,
                    coalesce(sum(k.held), 0)::int8 as flow_waiting_count
             from flow_keys k where k.queue_id = q.id) w
         order by q.name"#,
        queue.account().0,
        queue.id().0,
    )
    .fetch_optional(pool)
    .await
}

/// A queue that dead-letters into one of the given queues: named by its consumer (`messages` 0) or
/// the source of `messages` dead-lettered messages there (`source_name` None once it is deleted).
#[derive(Debug, Clone)]
pub struct DeadLetterSource {
    pub queue_id: QueueId,
    pub source: QueueId,
    pub source_name: Option<String>,
    pub messages: i64,
}

/// The dead-letter sources of the account's given queues: the consumers naming them (by the index of
/// consumers with a dead-letter queue) and the sources of their dead-lettered messages (by the partial
/// index of dead-lettered messages only). A source may appear in both, and a queue once more per consumer
/// of its own that dead-letters there: a lane is named by its queue.
pub async fn dead_letter_sources(
    pool: &PgPool,
    account: AccountId,
    queues: &[QueueId],
) -> Result<Vec<DeadLetterSource>, sqlx::Error> {
    let queues: Vec<Uuid> = queues.iter().map(|q| q.0).collect();
    sqlx::query_as!(
        DeadLetterSource,
        r#"select t.id as "queue_id!: QueueId", coalesce(s.parent_queue_id, s.id) as "source!: QueueId",
                coalesce(p.name, s.name) as "source_name?", 0::int8 as "messages!"
         from queues t
         join consumers c on c.account_id = t.account_id and c.dead_letter_queue = t.name
                         and c.dead_letter_queue <> ''
         join queues s on s.id = c.queue_id
         left join queues p on p.id = s.parent_queue_id
         where t.account_id = $1 and t.id = any($2)
         union all
         select g.queue_id, coalesce(s.parent_queue_id, g.source), coalesce(p.name, s.name), g.messages
         from (select m.queue_id, m.dead_letter_source as source, count(*) as messages
               from messages m
               where m.queue_id = any(array(select id from queues where account_id = $1 and id = any($2)))
                 and m.dead_letter_source is not null
               group by m.queue_id, m.dead_letter_source) g
         left join queues s on s.id = g.source and s.account_id = $1
         left join queues p on p.id = s.parent_queue_id"#,
        account.0,
        &queues,
    )
    .fetch_all(pool)
    .await
}

#[derive(Debug, Clone)]
pub struct ActivityBucket {
    pub bucket: DateTime<Utc>,
    pub published: i64,
    pub acked: i64,
}

/// The queue's activity buckets since `since`, oldest first.
pub async fn activity(
    pool: &PgPool,
    queue: OwnedQueue,
    since: DateTime<Utc>,
) -> Result<Vec<ActivityBucket>, sqlx::Error> {
    sqlx::query_as!(
        ActivityBucket,
        "select bucket, published, acked from queue_activity where queue_id = $1 and bucket >= $2 order by bucket",
        queue.id().0,
        since,
    )
    .fetch_all(pool)
    .await
}
