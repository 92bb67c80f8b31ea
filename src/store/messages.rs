//! Messages: claim, ack, retry, dead-letter, lease extension, peek, purge and wake-ups (publishing is in `publish`).
//!
//! A message is two rows: its payload in `message_bodies`, written once, and a narrow row in `messages`
//! that claims rewrite (`available_at`, `attempts`, `leased`). Claiming is one statement with
//! `FOR UPDATE SKIP LOCKED`, so concurrent pullers on any node never wait on each other or share a row.

use chrono::{DateTime, Utc};
use sqlx::{PgExecutor, PgPool};

use crate::ids::{ConsumerId, MessageId, QueueId};
use crate::queue::message::DeadLetterOrigin;
use crate::store::owned::OwnedQueue;

/// A message handed out by a claim or a peek.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct StoredMessage {
    /// The row leased: what its lease id names.
    pub id: MessageId,
    /// The id it was published under, which every consumer of its queue sees: a lane's copy has an id of
    /// its own (the `consumer_lanes` migration).
    pub published_id: MessageId,
    pub attempts: i32,
    pub published_at: DateTime<Utc>,
    pub content_type: i16,
    pub body: Vec<u8>,
    /// The name of the queue it was dead-lettered from, while that queue exists.
    pub dead_letter_source: Option<String>,
    /// The consumer that gave up on it, for a queue with several.
    pub dead_letter_consumer: Option<ConsumerId>,
    pub dead_lettered_at: Option<DateTime<Utc>>,
    pub ordering_key: Option<String>,
    pub flow_key: Option<String>,
}

impl StoredMessage {
    /// Where it was dead-lettered from, as its metadata shows it; None if it never was.
    pub fn dead_letter_origin(&self) -> Option<DeadLetterOrigin<'_>> {
        DeadLetterOrigin::of(self.dead_letter_source.as_deref(), self.dead_letter_consumer, self.dead_lettered_at)
    }
}

/// The condition on `message_bodies b` for the bodies that the rows a CTE deleted owned (`$gone`: id, gen,
/// body_id): a row's own body, unless it is a copy sharing its message's body in a young generation (which
/// the generation's truncation takes); in the old generation (gen 2, `store::generations::OLD`) every row
/// owns its body, kept under its own id.
macro_rules! own_bodies {
    ($gone:literal) => {
        concat!(
            "b.gen = any(array(select distinct gen from ",
            $gone,
            ")) and b.id = any(array(select id from ",
            $gone,
            " where body_id is null or gen = 2))"
        )
    };
}

/// The id a row `$m` of `messages` was published under, which every consumer sees: a lane's copy names it
/// in `body_id` (the `consumer_lanes` migration), any other row is its own.
macro_rules! published_id {
    ($m:literal) => {
        concat!("coalesce(", $m, ".body_id, ", $m, ".id)")
    };
}

/// The id under which a row `$m` of `messages` finds its body: a copy in a young generation shares its
/// message's, in the old one it has its own (`store::generations::move_to_old`).
macro_rules! body_key {
    ($m:literal) => {
        concat!("case when ", $m, ".gen = 2 then ", $m, ".id else ", published_id!($m), " end")
    };
}

/// What happens to a message whose deliveries are used up: `$1` the queue, `$2` the dead-letter queue
/// (null: delete), `$3` the number of deliveries allowed. `exhausted(id)` must be defined before this.
/// A dead-lettered message keeps its id and timestamp, starts its attempts again and remembers its
/// source queue and the time it moved. The dead-letter
/// queue's row is share-locked so a concurrent delete of it waits; if it is already gone, the message
/// stays where it is until the queue is made again. The lock is taken only when a message is exhausted:
/// taken on every claim, concurrent claims would share it through a multixact each time, and a delete of
/// the dead-letter queue would stall every pull of the queues feeding it. A move changes two queues' counts, which no trigger sees (see the
/// `queue_counts` migration), so `moved` writes their deltas,
/// and the usage: a move is a write to the dead-letter queue; a message deleted for want of one is
/// counted as dead-lettered (`dropping` tells the delete's trigger, the `usage` migration).
///
/// Rows found by an earlier step are addressed as `id = any(array(...))`, one primary-key probe each,
/// rather than joined: a prepared statement's generic plan may join by merging along the whole primary
/// key from its start, which in a draining queue is where the dead entries of acked messages pile up, or
/// hash-join against a scan of every message.
///
/// The batch moved is one `messages.dead_lettered` event (the count and the first 100 ids) for each
/// subscription asking for it, recorded in the same commit (`store::events`).
macro_rules! dead_letter_ctes {
    () => {
        concat!(
            "dead_letter_queue as (select id from queues where id = $2 and exists (select 1 from exhausted) for key share),
        dead as (
            update messages m set queue_id = d.id, attempts = 0, leased = false, running = false,
                available_at = clock_timestamp(),
                dead_letter_source = $1, dead_lettered_at = now(),
                dead_letter_consumer = (select id from consumers where queue_id = $1)
            from dead_letter_queue d where m.id = any(array(select id from exhausted))
            returning m.id, m.size, m.published_at, ",
            published_id!("m"),
            " as published_id),
        moved as (
            insert into queue_count_deltas (queue_id, messages, bytes, oldest, dead_lettered, write_ops)
            select q.id, q.sign * count(*), q.sign * sum(dead.size), min(dead.published_at) filter (where q.sign > 0),
                   case when q.sign < 0 then count(*) else 0 end,
                   case when q.sign > 0 then sum(usage_chunks(dead.size)) else 0 end
            from dead cross join (values ($1::uuid, -1), ($2::uuid, 1)) as q(id, sign)
            group by q.id, q.sign),
        dropping as materialized (
            select set_config('skiplock.deleting', 'dead_lettered', true) where $2::uuid is null),
        dropped as (
            delete from messages m where m.id = any(array(select id from exhausted)) and $2::uuid is null
              and exists (select 1 from dropping)
            returning m.id, m.gen, m.body_id),
        dropped_bodies as (delete from message_bodies b where ",
            own_bodies!("dropped"),
            "),
        dead_letter_events as (
            insert into event_outbox (account_id, subscription_id, destination_queue_id, event, queue_id, queue_name,
                                      payload)
            select s.account_id, s.id, s.destination_queue_id, 'messages.dead_lettered', q.id, q.name,
                   jsonb_build_object('count', n.count, 'messageIds', n.ids, 'deadLetterQueue', d.name)
            from (select count(*) as count, (array_agg(replace(x.id::text, '-', '') order by x.id))[1:100] as ids
                  from (select published_id as id from dead
                        union all select ",
            published_id!("dropped"),
            " from dropped) x) n
            join queues q on q.id = $1
            left join queues d on d.id = $2
            join event_subscriptions s on s.account_id = q.account_id and s.enabled
                                       and 'messages.dead_lettered' = any(s.events)
                                       and (s.queue_id is null or s.queue_id = q.id) and s.destination_queue_id <> q.id
            where n.count > 0)"
        )
    };
}

/// The outcome of one claim: the leased messages, and the ready ones it found out of deliveries.
#[derive(Debug, Default)]
pub struct Claim {
    pub messages: Vec<StoredMessage>,
    /// Ready messages out of deliveries that the claim passed over, for `dead_letter` to move.
    pub used_up: Vec<MessageId>,
    /// Of those, how many `dead_letter` moved or deleted (set by the caller that ran it).
    pub exhausted: usize,
    /// The consumer's signing secrets as this claim read them (webhook claims only), so a batch
    /// claimed after a rotation answered is signed with the new secret on every node.
    pub secrets: Vec<String>,
    /// Webhook claims that leased something: milliseconds until the queue's next delayed message becomes
    /// visible, so the dispatcher needs no look of its own after a partial batch. (A lease that runs out is
    /// made claimable by the sweep, which wakes the queue.)
    pub next_in_ms: Option<i64>,
    /// The earliest waiting message the claim saw at or after its floor, those it took aside: where the
    /// queue's next floor may be (`ClaimFloor`). None: it saw none.
    pub first_live: Option<DateTime<Utc>>,
}

#[derive(sqlx::FromRow)]
struct ClaimRow {
    id: Option<MessageId>,
    published_id: Option<MessageId>,
    attempts: Option<i32>,
    published_at: Option<DateTime<Utc>>,
    content_type: Option<i16>,
    body: Option<Vec<u8>>,
    dead_letter_source: Option<String>,
    dead_letter_consumer: Option<ConsumerId>,
    dead_lettered_at: Option<DateTime<Utc>>,
    ordering_key: Option<String>,
    flow_key: Option<String>,
    first_live: Option<DateTime<Utc>>,
    signing_secret: Option<String>,
    previous_signing_secret: Option<String>,
    next_in_ms: Option<i64>,
}

/// How a queue's messages are claimed.
#[derive(Debug, Clone, Copy)]
pub struct ClaimSpec {
    pub queue: OwnedQueue,
    pub dead_letter_queue: Option<QueueId>,
    pub max_deliveries: i32,
    /// Messages older than this are past retention: never delivered, deleted by the sweep.
    pub retention_seconds: i64,
}

/// A claim: `$1` the queue, `$2` the deliveries allowed, `$3` the batch, `$4` the lease in ms, `$5` the
/// retention in seconds, `$6` the queue's claim floor (`engine::floors`); a webhook claim adds `$7` its
/// consumer, and `$webhook` its columns. Ready messages out of deliveries come back with attempts -1 (`Claim::used_up`); a last
/// row without a message carries what the claim learnt of the queue. Pulls have a statement of their own
/// because PostgreSQL plans a claim at every call (see `docs/design-notes.md`, "The claim's plan, made at
/// every call"), and the webhook's steps more than doubled that planning.
///
/// The claim walks `messages_ready` from the floor, not from the queue's first entry: beside a held
/// snapshot, every message claimed or acked since leaves an entry there that no vacuum may remove, and a
/// walk from the start would cross them all. `first_live` is the earliest message waiting at or after the
/// floor, those this claim leased aside (rows locked by other claims are counted), for the next floor.
///
/// What is planned at every call is kept small: the body's key is worked out by the update, the source's
/// name by a function (the `queue_display_name` migration), and `first_live` is an ordered look, not a
/// `min()`, which the planner would plan twice (as an aggregate, and as the index look it rewrites it to).
macro_rules! claim_statement {
    ($webhook:literal) => {
        concat!(
            "with candidates as (
                 select id, gen, attempts from messages
                 where queue_id = $1 and not running and available_at >= $6 and available_at <= now()
                   and published_at > now() - make_interval(secs => $5)
                 order by available_at, id
                 limit $3
                 for update skip locked),
             exhausted as (select id from candidates where attempts >= $2),
             claimed as (
                 update messages m
                 set available_at = clock_timestamp() + make_interval(secs => $4::float8 / 1000),
                     attempts = m.attempts + 1, leased = true, running = true
                 where m.gen = any(array(select distinct gen from candidates where attempts < $2))
                   and m.id = any(array(select id from candidates where attempts < $2))
                 returning m.id, m.gen, m.body_id, m.attempts, m.published_at, m.dead_letter_source,
                           m.dead_letter_consumer, m.dead_lettered_at, m.ordering_key, m.flow_key, m.size, ",
            body_key!("m"),
            " as body_key),
             metered as (
                 insert into queue_count_deltas (queue_id, messages, bytes, delivered, delivered_bytes, read_ops)
                 select $1, 0, 0, count(*), sum(size), sum(usage_chunks(size)) from claimed having count(*) > 0)
             select c.id, ",
            published_id!("c"),
            " as published_id, c.attempts, c.published_at, b.content_type, b.body,
                    case when c.dead_letter_source is not null
                         then queue_display_name(c.dead_letter_source) end as dead_letter_source,
                    c.dead_letter_consumer, c.dead_lettered_at, c.ordering_key, c.flow_key, null::timestamptz as first_live,
                    null::text as signing_secret, null::text as previous_signing_secret, null::int8 as next_in_ms
             from claimed c join message_bodies b
                  on b.gen = any(array(select distinct gen from claimed)) and b.id = c.body_key
             union all
             select id, null, -1, null, null, null, null, null, null, null, null, null, null, null, null from exhausted
             union all
             select null, null, null, null, null, null, null, null, null, null, null,
                    (select available_at from messages
                     where queue_id = $1 and not running and available_at >= $6 and available_at <= now()
                       and published_at > now() - make_interval(secs => $5)
                       and id <> all(array(select id from claimed))
                     order by available_at limit 1),
                    ",
            $webhook
        )
    };
}

/// A pull's claim: no secrets or timer to read.
const CLAIM_FOR_PULL: &str = claim_statement!("null, null, null");

/// A webhook's claim (the batch's dispatch slot is taken beforehand, `engine::slots`) reads the
/// consumer's signing secrets and when the queue's next delayed message becomes visible.
const CLAIM_FOR_WEBHOOK: &str = claim_statement!(
    "(select signing_secret from consumers where id = $7),
                    (select previous_signing_secret from consumers
                     where id = $7 and previous_secret_expires_at > now()),
                    (select ceil(extract(epoch from min(available_at) - now()) * 1000)::int8 from messages
                     where queue_id = $1 and not running and available_at > now() and available_at < 'infinity')"
);

/// Leases up to `limit` ready messages for `visibility_timeout_ms`, walking the queue's waiting messages
/// from `floor`. Ready messages whose deliveries are used up (their last lease ran out) are passed over and
/// returned in `used_up`, for `dead_letter`: a claim that also moved them would carry that statement's
/// updates, deletes and triggers at every call, where they are rarely needed (a sixth of PostgreSQL's time
/// on the push path at a trickle).
pub async fn claim(
    db: impl PgExecutor<'_>,
    spec: ClaimSpec,
    floor: DateTime<Utc>,
    webhook: Option<ConsumerId>,
    limit: i64,
    visibility_timeout_ms: i64,
) -> Result<Claim, sqlx::Error> {
    let statement = if webhook.is_some() { CLAIM_FOR_WEBHOOK } else { CLAIM_FOR_PULL };
    let query = sqlx::query_as::<_, ClaimRow>(statement)
        .bind(spec.queue.id())
        .bind(spec.max_deliveries)
        .bind(limit)
        .bind(visibility_timeout_ms as f64)
        .bind(spec.retention_seconds as f64)
        .bind(floor);
    let query = match webhook {
        Some(consumer) => query.bind(consumer),
        None => query,
    };
    let rows = query.fetch_all(db).await?;
    let mut claim = Claim::default();
    for row in rows {
        let Some(id) = row.id else {
            claim.next_in_ms = row.next_in_ms;
            claim.secrets.extend(row.signing_secret.into_iter().chain(row.previous_signing_secret));
            claim.first_live = row.first_live;
            continue;
        };
        match (row.attempts, row.published_at, row.content_type, row.body) {
            (Some(attempts), Some(published_at), Some(content_type), Some(body)) => {
                claim.messages.push(StoredMessage {
                    id,
                    published_id: row.published_id.unwrap_or(id),
                    attempts,
                    published_at,
                    content_type,
                    body,
                    dead_letter_source: row.dead_letter_source,
                    dead_letter_consumer: row.dead_letter_consumer,
                    dead_lettered_at: row.dead_lettered_at,
                    ordering_key: row.ordering_key,
                    flow_key: row.flow_key,
                })
            }
            _ => claim.used_up.push(id),
        }
    }
    // A claim that leased nothing needs no timer.
    if claim.messages.is_empty() {
        claim.next_in_ms = None;
    }
    claim.messages.sort_by_key(|m| (m.published_at, m.published_id.0));
    Ok(claim)
}

/// Dead-letters the messages a claim found out of deliveries (`Claim::used_up`), or deletes them when
/// the queue has no dead-letter queue. Those another claimer holds or moved meanwhile are left to it;
/// returns how many this call moved or deleted.
pub async fn dead_letter(db: impl PgExecutor<'_>, spec: ClaimSpec, ids: &[MessageId]) -> Result<usize, sqlx::Error> {
    let moved: Vec<(MessageId,)> = sqlx::query_as(concat!(
        "with exhausted as (
             select id from messages
             where id = any($4) and queue_id = $1 and attempts >= $3 and not running and available_at <= now()
             for update skip locked),
         ",
        dead_letter_ctes!(),
        "
         select id from exhausted"
    ))
    .bind(spec.queue.id())
    .bind(spec.dead_letter_queue)
    .bind(spec.max_deliveries)
    .bind(ids)
    .fetch_all(db)
    .await?;
    Ok(moved.len())
}

/// One retry: the lease it names (message and delivery number) and how long to wait.
#[derive(Debug, Clone, Copy)]
pub struct Retry {
    pub id: MessageId,
    pub attempt: i32,
    pub delay_seconds: i64,
}

/// What a retry request did.
#[derive(Debug, Default)]
pub struct Retried {
    /// Back in the queue after their delay.
    pub retried: Vec<MessageId>,
    /// Out of deliveries: dead-lettered or deleted.
    pub exhausted: Vec<MessageId>,
}

/// Returns leased messages to the queue after their delay, if the lease named is still the message's
/// current one. Messages whose deliveries are used up go to the dead-letter queue at once. Returns the
/// ids that were retried or dead-lettered; the others' leases were stale.
pub async fn retry(db: impl PgExecutor<'_>, spec: ClaimSpec, retries: &[Retry]) -> Result<Retried, sqlx::Error> {
    let ids: Vec<MessageId> = retries.iter().map(|r| r.id).collect();
    let attempts: Vec<i32> = retries.iter().map(|r| r.attempt).collect();
    let delays: Vec<i64> = retries.iter().map(|r| r.delay_seconds).collect();
    let rows: Vec<(MessageId, bool)> = sqlx::query_as(concat!(
        "with current as (
             select m.id, m.attempts >= $3 as used_up, r.delay
             from messages m join unnest($4::uuid[], $5::int4[], $6::int8[]) as r(id, attempt, delay)
               on m.id = r.id and m.attempts = r.attempt
             where m.queue_id = $1 and m.leased
             order by m.id
             for update of m),
         exhausted as (select id from current where used_up),
         retried as (
             update messages m
             set available_at = clock_timestamp() + make_interval(secs => c.delay), leased = false, running = false
             from current c where m.id = c.id and not c.used_up
             returning m.id),
         retries_metered as (
             insert into queue_count_deltas (queue_id, messages, bytes, retried)
             select $1, 0, 0, count(*) from retried having count(*) > 0),
         ",
        dead_letter_ctes!(),
        "
         select id, false from retried union all select id, true from exhausted"
    ))
    .bind(spec.queue.id())
    .bind(spec.dead_letter_queue)
    .bind(spec.max_deliveries)
    .bind(&ids)
    .bind(&attempts)
    .bind(&delays)
    .fetch_all(db)
    .await?;
    let (exhausted, retried): (Vec<_>, Vec<_>) = rows.into_iter().partition(|(_, used_up)| *used_up);
    Ok(Retried {
        retried: retried.into_iter().map(|(id, _)| id).collect(),
        exhausted: exhausted.into_iter().map(|(id, _)| id).collect(),
    })
}

/// One lease extension: the lease it names (message and delivery number) and the new visibility.
#[derive(Debug, Clone, Copy)]
pub struct Extension {
    pub id: MessageId,
    pub attempt: i32,
    pub visibility_timeout_ms: i64,
}

/// Keeps leased messages of the account's queue invisible until now + their new timeout, where the lease
/// named is still the message's current one: same delivery, still leased (not retried or released), and
/// the message still there (not acked) and in this queue (not dead-lettered). A lease that ran out stays
/// current until the message is claimed again. None: the account has no such queue; else the leases
/// extended, as (message, delivery). Each (message, delivery) must be given once.
pub async fn extend(
    db: impl PgExecutor<'_>,
    queue: OwnedQueue,
    extensions: &[Extension],
) -> Result<Option<Vec<(MessageId, i32)>>, sqlx::Error> {
    let ids: Vec<MessageId> = extensions.iter().map(|e| e.id).collect();
    let attempts: Vec<i32> = extensions.iter().map(|e| e.attempt).collect();
    let timeouts: Vec<i64> = extensions.iter().map(|e| e.visibility_timeout_ms).collect();
    let rows: Vec<(Option<MessageId>, Option<i32>)> = sqlx::query_as(
        "with target as (select id from queues where account_id = $1 and id = $2),
         extended as (
             update messages m set available_at = clock_timestamp() + make_interval(secs => r.ms::float8 / 1000), running = true
             from unnest($3::uuid[], $4::int4[], $5::int8[]) as r(id, attempt, ms)
             where m.queue_id = (select id from target) and m.id = r.id and m.attempts = r.attempt and m.leased
             returning m.id, m.attempts)
         select e.id, e.attempts from target t left join extended e on true",
    )
    .bind(queue.account())
    .bind(queue.id())
    .bind(&ids)
    .bind(&attempts)
    .bind(&timeouts)
    .fetch_all(db)
    .await?;
    if rows.is_empty() {
        return Ok(None);
    }
    // The queue's row comes back once with no message when nothing was extended.
    Ok(Some(rows.into_iter().filter_map(|(id, attempt)| Some((id?, attempt?))).collect()))
}

/// Gives back leases that were never used (a delivery abandoned at shutdown): the messages are available
/// at once and the abandoned delivery does not count against their retries.
pub async fn release(
    db: impl PgExecutor<'_>,
    queue: OwnedQueue,
    leases: &[(MessageId, i32)],
) -> Result<u64, sqlx::Error> {
    let ids: Vec<MessageId> = leases.iter().map(|(id, _)| *id).collect();
    let attempts: Vec<i32> = leases.iter().map(|(_, a)| *a).collect();
    let done = sqlx::query(
        "update messages m set available_at = clock_timestamp(), leased = false, running = false,
             attempts = m.attempts - 1
         from unnest($2::uuid[], $3::int4[]) as r(id, attempt)
         where m.queue_id = $1 and m.id = r.id and m.attempts = r.attempt and m.leased",
    )
    .bind(queue.id())
    .bind(&ids)
    .bind(&attempts)
    .execute(db)
    .await?;
    Ok(done.rows_affected())
}

/// The first messages in delivery order, without leasing them: those waiting and those out on a lease.
pub async fn peek(
    db: impl PgExecutor<'_>,
    queue: OwnedQueue,
    retention_seconds: i64,
    limit: i64,
) -> Result<Vec<StoredMessage>, sqlx::Error> {
    sqlx::query_as(concat!(
        "select m.id, ",
        published_id!("m"),
        " as published_id, m.attempts, m.published_at, b.content_type, b.body,
                queue_display_name(m.dead_letter_source) as dead_letter_source, m.dead_letter_consumer,
                m.dead_lettered_at,
                m.ordering_key, m.flow_key
         from (
             (select id, gen, available_at from messages
              where queue_id = $1 and not running and published_at > now() - make_interval(secs => $3)
              order by available_at, id limit $2)
             union all
             (select id, gen, available_at from messages
              where running and queue_id = $1 and published_at > now() - make_interval(secs => $3)
              order by available_at, id limit $2)) p
         join messages m on m.gen = p.gen and m.id = p.id
         join message_bodies b on b.gen = m.gen and b.id = ",
        body_key!("m"),
        "
         order by p.available_at, p.id
         limit $2"
    ))
    .bind(queue.id())
    .bind(limit)
    .bind(retention_seconds as f64)
    .fetch_all(db)
    .await
}

/// The channel of wake-ups: a queue's id, when it has new or returned messages or changed state.
pub const WAKE_CHANNEL: &str = "skiplock_messages";

/// Wakes the dispatchers and long-polling pulls listening on any node for these queues; unless `all`,
/// only queues that pulls wait on (see `wait_on`). One statement, its own transaction: a wake-up needs
/// no durability, so it commits without waiting for the WAL flush (`set_config` with `is_local` holds
/// for the statement's implicit transaction). Notifying every queue read by pulls sent about one
/// notification per publish statement under W3 (single publishes), and PostgreSQL's CPU per message rose
/// from 12 to 22 µs in that (noisy) run, hence the filter. Two statements rather than one with
/// `$2 or exists (...)`: PostgreSQL planned that one again at every call (a custom plan folds `$2`), a
/// third of its cost on the publish path.
pub async fn wake(pool: &PgPool, queues: &[QueueId], all: bool) -> Result<(), sqlx::Error> {
    let sql = if all {
        "select pg_notify('skiplock_messages', q::text)
         from unnest($1::uuid[]) q, (select set_config('synchronous_commit', 'off', true)) s"
    } else {
        "select pg_notify('skiplock_messages', q::text)
         from unnest($1::uuid[]) q, (select set_config('synchronous_commit', 'off', true)) s
         where exists (select 1 from queue_waiters w where w.queue_id = q and w.until > now())"
    };
    sqlx::query(sql).bind(queues).execute(pool).await?;
    Ok(())
}

/// Marks the queue as waited on by long-polling pulls for the next `seconds`, so that publishes and
/// retries wake them. Rows of queues nobody waited on for an hour go in the same statement.
pub async fn wait_on(pool: &PgPool, queue: QueueId, seconds: i64) -> Result<(), sqlx::Error> {
    sqlx::query(
        "with gone as (delete from queue_waiters where until < now() - interval '1 hour' and queue_id <> $1)
         insert into queue_waiters (queue_id, until) values ($1, now() + make_interval(secs => $2))
         on conflict (queue_id) do update set until = greatest(queue_waiters.until, excluded.until)",
    )
    .bind(queue)
    .bind(seconds as f64)
    .execute(pool)
    .await?;
    Ok(())
}

/// Milliseconds until the queue's next delayed message becomes visible, if it has one (a long-polling
/// pull's timer; a lease that runs out wakes the queue by the sweep). Walks `messages_ready` from now on.
pub async fn next_visible_in_ms(
    db: impl PgExecutor<'_>,
    queue: OwnedQueue,
    retention_seconds: i64,
) -> Result<Option<i64>, sqlx::Error> {
    sqlx::query_scalar(
        "select ceil(extract(epoch from min(available_at) - now()) * 1000)::int8 from messages
         where queue_id = $1 and not running and available_at > now() and available_at < 'infinity'
           and published_at > now() - make_interval(secs => $2)",
    )
    .bind(queue.id())
    .bind(retention_seconds as f64)
    .fetch_one(db)
    .await
}

/// What a sweep of leases that ran out did.
#[derive(Debug, Default)]
pub struct Swept {
    /// Queues with messages claimable again, to wake.
    pub queues: Vec<QueueId>,
    pub count: usize,
    /// The earliest lease that ran out at or after the sweep's floor and is still running (locked by
    /// another sweep, or past this one's limit), those it swept aside. Only leases that ran out are looked
    /// at: beside a held snapshot, the leases acked before they would have run out lie ahead, where no
    /// look should walk them.
    pub first_running: Option<DateTime<Utc>>,
}

/// Makes claimable again up to `limit` messages whose lease ran out (their lease stays current for an
/// ack, an extension or a retry until they are claimed again), walking `messages_running` from `floor`.
/// Across accounts: the node's sweep, which answers no tenant.
pub async fn sweep_ran_out(db: impl PgExecutor<'_>, floor: DateTime<Utc>, limit: i64) -> Result<Swept, sqlx::Error> {
    type Row = (Option<QueueId>, Option<i64>, Option<DateTime<Utc>>);
    let rows: Vec<Row> = sqlx::query_as(
        "with ran_out as (
             select id from messages where running and available_at >= $1 and available_at <= now()
             order by available_at limit $2
             for update skip locked),
         swept as (
             update messages m set running = false, available_at = clock_timestamp()
             where m.id = any(array(select id from ran_out))
             returning m.queue_id),
         metered as (
             insert into queue_count_deltas (queue_id, messages, bytes, retried)
             select queue_id, 0, 0, count(*) from swept group by queue_id)
         select queue_id, count(*), null::timestamptz from swept group by queue_id
         union all
         select null, null, (select min(available_at) from messages
                             where running and available_at >= $1 and available_at <= now()
                               and id <> all(array(select id from ran_out)))",
    )
    .bind(floor)
    .bind(limit)
    .fetch_all(db)
    .await?;
    let mut swept = Swept::default();
    for (queue, count, first) in rows {
        match queue {
            Some(queue) => {
                swept.queues.push(queue);
                swept.count += count.unwrap_or(0) as usize;
            }
            None => swept.first_running = first,
        }
    }
    Ok(swept)
}

/// Deletes the given messages of the queue (a webhook's acks and purges by ref); returns the ids that were
/// there.
/// No separate pass locks the rows in id order first (it cost more than the rare deadlock it avoids), and
/// rows reach a delete in the order of the scan. Only acks, retries or purges of the
/// same messages at once (stale leases) could then deadlock; PostgreSQL aborts one of them, nothing of
/// it applies, and its caller gets a 503 to retry (see `error.rs`).
pub async fn delete(db: impl PgExecutor<'_>, queue: OwnedQueue, ids: &[MessageId]) -> Result<Deleted, sqlx::Error> {
    let rows: Vec<(MessageId, i32, bool)> = sqlx::query_as(concat!(
        "with gone as (
             delete from messages m where queue_id = $1 and id = any($2)
             returning m.id, m.gen, m.body_id, m.size, (m.ordering_key is not null or m.flow_key is not null) as keyed),
              bodies as (delete from message_bodies b where ",
        own_bodies!("gone"),
        ")
         select id, size, keyed from gone"
    ))
    .bind(queue.id())
    .bind(ids)
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().collect())
}

/// What an ack found: the messages it deleted, and the kind of consumer the queue has (if any).
#[derive(Debug)]
pub struct Acked {
    pub deleted: Deleted,
    pub consumer_kind: Option<crate::queue::consumer::ConsumerKind>,
}

/// Deletes acked messages of the account's queue in one statement that also checks the queue is the
/// account's, so an ack costs one round trip, not a look-up of the queue and then a delete.
/// None: the account has no such queue. Rows are not locked in id order first, as for `delete`.
pub async fn ack(db: impl PgExecutor<'_>, queue: OwnedQueue, ids: &[MessageId]) -> Result<Option<Acked>, sqlx::Error> {
    type Row = (Option<crate::queue::consumer::ConsumerKind>, Option<MessageId>, Option<i32>, Option<bool>);
    let rows: Vec<Row> = sqlx::query_as(concat!(
        "with target as (
             select q.id, (select c.kind from consumers c where c.queue_id = q.id) as kind
             from queues q where q.account_id = $1 and q.id = $2),
         gone as (
             delete from messages m where m.queue_id = (select id from target) and m.id = any($3)
             returning m.id, m.gen, m.body_id, m.size, (m.ordering_key is not null or m.flow_key is not null) as keyed),
         bodies as (delete from message_bodies b where ",
        own_bodies!("gone"),
        ")
         select t.kind, g.id, g.size, g.keyed from target t left join gone g on true"
    ))
    .bind(queue.account())
    .bind(queue.id())
    .bind(ids)
    .fetch_all(db)
    .await?;
    let Some((consumer_kind, _, _, _)) = rows.first() else { return Ok(None) };
    let consumer_kind = *consumer_kind;
    // The queue's row comes back once with no message when nothing was deleted.
    let deleted = rows.into_iter().filter_map(|(_, id, size, keyed)| Some((id?, size?, keyed?))).collect();
    Ok(Some(Acked { deleted, consumer_kind }))
}

/// A webhook batch answered with acks alone: its messages.
#[derive(Debug, Clone)]
pub struct AckedBatch {
    pub queue: OwnedQueue,
    pub ids: Vec<MessageId>,
}

/// Applies the acks of many webhook batches, of any queues and accounts, in one statement. Each batch's messages are deleted only from its queue, and only if the queue
/// is its account's. Returns, per queue found, what was deleted there; a queue not found is absent.
pub async fn ack_batches(
    db: impl PgExecutor<'_>,
    batches: &[AckedBatch],
) -> Result<Vec<(QueueId, Deleted)>, sqlx::Error> {
    let mut accounts = Vec::new();
    let mut queues = Vec::new();
    let mut ids = Vec::new();
    for batch in batches {
        for id in &batch.ids {
            accounts.push(batch.queue.account());
            queues.push(batch.queue.id());
            ids.push(*id);
        }
    }
    type Row = (QueueId, Option<MessageId>, Option<i32>, Option<bool>);
    let rows: Vec<Row> = sqlx::query_as(concat!(
        "with targets as (
             select q.id, q.account_id from queues q
             where (q.id, q.account_id) in (select * from unnest($2::uuid[], $1::uuid[]))),
         acked as (
             select a.id, a.queue_id from unnest($1::uuid[], $2::uuid[], $3::uuid[]) as a(account_id, queue_id, id)
             where (a.queue_id, a.account_id) in (select id, account_id from targets)),
         gone as (
             delete from messages m where m.id = any(array(select id from acked))
               and (m.queue_id, m.id) in (select queue_id, id from acked)
             returning m.queue_id, m.id, m.gen, m.body_id, m.size, (m.ordering_key is not null or m.flow_key is not null) as keyed),
         bodies as (delete from message_bodies b where ",
            own_bodies!("gone"),
            ")
         select t.id, g.id, g.size, g.keyed from targets t left join gone g on g.queue_id = t.id"
        ),
    )
    .bind(&accounts)
    .bind(&queues)
    .bind(&ids)
    .fetch_all(db)
    .await?;
    let mut deleted: Vec<(QueueId, Deleted)> = Vec::new();
    for (queue, id, size, keyed) in rows {
        let at = match deleted.iter().position(|(q, _)| *q == queue) {
            Some(at) => at,
            None => {
                deleted.push((queue, Deleted::default()));
                deleted.len() - 1
            }
        };
        // A queue's row comes back once with no message when nothing of it was deleted.
        if let (Some(id), Some(size), Some(keyed)) = (id, size, keyed) {
            let found = &mut deleted[at].1;
            found.ids.push(id);
            found.bytes += i64::from(size);
            found.keyed |= keyed;
        }
    }
    Ok(deleted)
}

/// The messages a delete found, their total size, and whether any had an ordering or a flow key (its
/// next message may be deliverable now).
#[derive(Debug, Default)]
pub struct Deleted {
    pub ids: Vec<MessageId>,
    pub bytes: i64,
    pub keyed: bool,
}

/// Collects a delete's `(id, size, keyed)` rows.
impl FromIterator<(MessageId, i32, bool)> for Deleted {
    fn from_iter<I: IntoIterator<Item = (MessageId, i32, bool)>>(rows: I) -> Self {
        let mut deleted = Deleted::default();
        for (id, size, keyed) in rows {
            deleted.ids.push(id);
            deleted.bytes += i64::from(size);
            deleted.keyed |= keyed;
        }
        deleted
    }
}

/// Deletes every message of a queue (a purge), locking in id order as retries do.
pub(super) async fn delete_all(db: impl PgExecutor<'_>, queue: QueueId) -> Result<u64, sqlx::Error> {
    let done = sqlx::query(concat!(
        "with removing as materialized (select set_config('skiplock.deleting', 'removed', true)),
              doomed as (select id from messages where queue_id = $1 order by id for update),
              gone as (delete from messages m using doomed d where m.id = d.id and exists (select 1 from removing)
                       returning m.id, m.gen, m.body_id)
         delete from message_bodies b where ",
        own_bodies!("gone")
    ))
    .bind(queue)
    .execute(db)
    .await?;
    Ok(done.rows_affected())
}

/// A statement that deletes the messages whose ids the given select picks (`doomed`), and their bodies;
/// `$reason` tells the delete's trigger what usage it is (the `usage` migration).
macro_rules! delete_doomed {
    ($reason:literal, $doomed:literal) => {
        concat!(
            "with reason as materialized (select set_config('skiplock.deleting', '",
            $reason,
            "', true)),
         doomed as (",
            $doomed,
            "),
         gone as (delete from messages m where m.id = any(array(select id from doomed)) and exists (select 1 from reason)
                  returning m.id, m.gen, m.body_id)
         delete from message_bodies b where ",
            own_bodies!("gone")
        )
    };
}

/// Deletes up to `limit` messages of a deleted queue (`queues::delete`), skipping the rows a statement in
/// flight holds (an ack or a claim begun before the deletion), which a later batch takes; returns how
/// many went.
pub async fn delete_of_deleted(db: impl PgExecutor<'_>, queue: QueueId, limit: i64) -> Result<u64, sqlx::Error> {
    let done = sqlx::query(delete_doomed!(
        "removed",
        "select m.id from messages m join deleted_queues d on d.queue_id = m.queue_id
             where d.queue_id = $1 limit $2 for update of m skip locked"
    ))
    .bind(queue)
    .bind(limit)
    .execute(db)
    .await?;
    Ok(done.rows_affected())
}

/// Deletes up to `limit` of the queue's messages, whatever their state (an account's deletion, in
/// batches short enough that no lock is held for long). Returns how many went.
pub async fn delete_some(pool: &PgPool, queue: OwnedQueue, limit: i64) -> Result<u64, sqlx::Error> {
    let done = sqlx::query(delete_doomed!(
        "removed",
        "select m.id from messages m join queues q on q.id = m.queue_id and q.account_id = $1
             where m.queue_id = $2 limit $3 for update of m skip locked"
    ))
    .bind(queue.account())
    .bind(queue.id())
    .bind(limit)
    .execute(pool)
    .await?;
    Ok(done.rows_affected())
}

/// Deletes up to `limit` of the queue's messages that are older than its retention period (delivered or
/// not), or all of them if the queue no longer exists. Returns how many went. The retention sweep's, across
/// accounts: it answers no tenant.
pub async fn delete_expired(pool: &PgPool, queue: QueueId, limit: i64) -> Result<u64, sqlx::Error> {
    let done = sqlx::query(delete_doomed!(
        "expired",
        "select m.id from messages m left join queues q on q.id = m.queue_id
             where m.queue_id = $1
               and (q.id is null or m.published_at < now() - make_interval(secs => q.message_retention_period))
             limit $2
             for update of m skip locked"
    ))
    .bind(queue)
    .bind(limit)
    .execute(pool)
    .await?;
    Ok(done.rows_affected())
}

/// Whether the account's queue holds message `id` now.
pub async fn holds(db: impl PgExecutor<'_>, queue: OwnedQueue, id: MessageId) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar(
        "select exists (select 1 from messages m join queues q on q.id = m.queue_id
                        where m.id = $3 and m.queue_id = $2 and q.account_id = $1)",
    )
    .bind(queue.account())
    .bind(queue.id())
    .bind(id)
    .fetch_one(db)
    .await
}
