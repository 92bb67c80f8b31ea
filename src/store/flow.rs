//! Flow control per key (migration `…08000001_flow_control`): the state of a queue's keys as the triggers
//! keep it, the account's limits for one key, and the statements that apply changed limits. Letting
//! messages go and holding them back is done by the triggers on `messages`, in the statements that
//! publish, ack and move them.

use chrono::{DateTime, Utc};
use sqlx::postgres::PgRow;
use sqlx::{PgExecutor, PgPool, Row};

use crate::ids::QueueId;
use crate::queue::flow::FlowLimits;
use crate::store::owned::OwnedQueue;

/// A key of a queue: its messages let go and held back, the limits that apply to it, and the account's
/// own limits for it when it has some.
#[derive(Debug, Clone)]
pub struct FlowKey {
    pub key: String,
    pub released: i64,
    pub waiting: i64,
    /// The earliest time the key's rate lets its next message go, when that is ahead.
    pub next_at: Option<DateTime<Utc>>,
    /// What applies: the account's limit for the key, else the consumer's.
    pub limits: FlowLimits,
    pub paused: bool,
    /// The account's limits for the key (`None` when it has none).
    pub overrides: Option<FlowLimits>,
    pub updated_at: Option<DateTime<Utc>>,
}

/// A key's state and limits, for the keys of the CTE `keys (flow_key)`, in the account's queue ($1, $2).
macro_rules! key_state {
    () => {
        "select k.flow_key, coalesce(f.released, 0)::int8 as released, coalesce(f.held, 0)::int8 as waiting,
                case when f.next_at > now() then f.next_at end as next_at,
                coalesce(o.parallelism, c.flow_parallelism)::int8 as parallelism,
                coalesce(o.rate, c.flow_rate)::int8 as rate,
                (case when coalesce(o.rate, c.flow_rate) is not null then coalesce(o.period, c.flow_period, 1) end)::int8 as period,
                coalesce(o.paused, false) as paused, o.flow_key is not null as overridden,
                o.parallelism::int8 as own_parallelism, o.rate::int8 as own_rate, o.period::int8 as own_period,
                o.updated_at, count(*) over () as total
         from keys k
         join queues q on q.id = $1 and q.account_id = $2
         left join flow_keys f on f.queue_id = q.id and f.flow_key = k.flow_key
         left join flow_limits o on o.queue_id = q.id and o.flow_key = k.flow_key
         left join consumers c on c.queue_id = q.id"
    };
}

/// The keys a list shows of queue `$1`: those with messages, and those with limits of their own; only
/// those holding messages back when `$3`.
macro_rules! listed_keys {
    () => {
        "select f.flow_key from flow_keys f
         where f.queue_id = $1 and (f.held > 0 or (f.released > 0 and not $3))
         union
         select o.flow_key from flow_limits o where o.queue_id = $1 and not $3"
    };
}

fn flow_key(row: &PgRow) -> FlowKey {
    let overridden: bool = row.get("overridden");
    FlowKey {
        key: row.get("flow_key"),
        released: row.get("released"),
        waiting: row.get("waiting"),
        next_at: row.get("next_at"),
        limits: FlowLimits { parallelism: row.get("parallelism"), rate: row.get("rate"), period: row.get("period") },
        paused: row.get("paused"),
        overrides: overridden.then(|| FlowLimits {
            parallelism: row.get("own_parallelism"),
            rate: row.get("own_rate"),
            period: row.get("own_period"),
        }),
        updated_at: row.get("updated_at"),
    }
}

/// A page of the queue's keys that have messages or limits of their own, those holding the most messages
/// back first (only those holding some back when `waiting_only`), and how many there are.
pub async fn keys(
    pool: &PgPool,
    queue: OwnedQueue,
    waiting_only: bool,
    limit: i64,
    offset: i64,
) -> Result<(Vec<FlowKey>, i64), sqlx::Error> {
    let statement = concat!(
        "with keys as (",
        listed_keys!(),
        ") ",
        key_state!(),
        "
         order by waiting desc, k.flow_key
         limit $4 offset $5"
    );
    let rows = sqlx::query(statement)
        .bind(queue.id())
        .bind(queue.account())
        .bind(waiting_only)
        .bind(limit)
        .bind(offset)
        .fetch_all(pool)
        .await?;
    // A page past the last has no row to carry the count.
    let total: i64 = match rows.first() {
        Some(row) => row.get("total"),
        None => {
            sqlx::query_scalar(concat!(
                "select count(*) from (",
                listed_keys!(),
                ") k where exists (select 1 from queues q where q.id = $1 and q.account_id = $2)"
            ))
            .bind(queue.id())
            .bind(queue.account())
            .bind(waiting_only)
            .fetch_one(pool)
            .await?
        }
    };
    Ok((rows.iter().map(flow_key).collect(), total))
}

/// One key of the queue, whether or not it has messages; None when the account has no such queue.
pub async fn key(pool: &PgPool, queue: OwnedQueue, key: &str) -> Result<Option<FlowKey>, sqlx::Error> {
    let statement = concat!("with keys as (select $3::text collate \"C\" as flow_key) ", key_state!());
    let row = sqlx::query(statement).bind(queue.id()).bind(queue.account()).bind(key).fetch_optional(pool).await?;
    Ok(row.as_ref().map(flow_key))
}

/// Sets the account's limits for one key of its queue and lets go what they now allow; false when the
/// account has no such queue. `paused: None` keeps the key's pause as it is.
pub async fn set_limits(
    pool: &PgPool,
    queue: OwnedQueue,
    key: &str,
    limits: FlowLimits,
    paused: Option<bool>,
) -> Result<bool, sqlx::Error> {
    let statement = "insert into flow_limits as o (queue_id, flow_key, parallelism, rate, period, paused)
         select q.id, $3, $4, $5, $6, coalesce($7, false) from queues q where q.id = $1 and q.account_id = $2
         on conflict (queue_id, flow_key) do update
             set parallelism = excluded.parallelism, rate = excluded.rate, period = excluded.period,
                 paused = coalesce($7, o.paused), updated_at = now()";
    change_and_apply(pool, queue, key, statement, |query| {
        query
            .bind(limits.parallelism.map(|v| v as i32))
            .bind(limits.rate.map(|v| v as i32))
            .bind(limits.period.map(|v| v as i32))
            .bind(paused)
    })
    .await
}

/// Pauses or resumes one key of the queue, keeping the account's limits for it; false when the account
/// has no such queue. A resume removes a row that held the pause alone, so that a key resumed (or never
/// paused) has no limits of its own.
pub async fn set_paused(pool: &PgPool, queue: OwnedQueue, key: &str, paused: bool) -> Result<bool, sqlx::Error> {
    if !paused {
        let statement = "with q as (select id from queues where id = $1 and account_id = $2),
             alone as (
                 delete from flow_limits o using q
                 where o.queue_id = q.id and o.flow_key = $3
                   and o.parallelism is null and o.rate is null and o.period is null),
             kept as (
                 update flow_limits o set paused = false, updated_at = now() from q
                 where o.queue_id = q.id and o.flow_key = $3
                   and (o.parallelism is not null or o.rate is not null or o.period is not null))
             select id from q";
        return change_and_apply(pool, queue, key, statement, |query| query).await;
    }
    let statement = "insert into flow_limits (queue_id, flow_key, paused)
         select q.id, $3, true from queues q where q.id = $1 and q.account_id = $2
         on conflict (queue_id, flow_key) do update set paused = true, updated_at = now()";
    change_and_apply(pool, queue, key, statement, |query| query).await
}

/// Removes the account's limits for one key (its consumer's apply again, unpaused); false when it had none.
pub async fn clear_limits(pool: &PgPool, queue: OwnedQueue, key: &str) -> Result<bool, sqlx::Error> {
    let statement = "delete from flow_limits o using queues q
         where o.queue_id = $1 and o.flow_key = $3 and q.id = o.queue_id and q.account_id = $2";
    change_and_apply(pool, queue, key, statement, |query| query).await
}

type Query<'q> = sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>;

/// Runs `statement` on the account's own limits for `key` in its queue (the queue `$1`, the account `$2`,
/// the key `$3`, then what `more` binds) and, when it changed or returned a row, applies the limits that
/// now hold in the same transaction; false when it changed none.
async fn change_and_apply<'q>(
    pool: &PgPool,
    queue: OwnedQueue,
    key: &'q str,
    statement: &'q str,
    more: impl FnOnce(Query<'q>) -> Query<'q>,
) -> Result<bool, sqlx::Error> {
    let mut tx = pool.begin().await?;
    let query = sqlx::query(statement).bind(queue.id()).bind(queue.account()).bind(key);
    if more(query).execute(&mut *tx).await?.rows_affected() == 0 {
        return Ok(false);
    }
    apply(&mut *tx, queue, key).await?;
    tx.commit().await?;
    Ok(true)
}

/// Counts the key anew when limits now apply to it, copies them into its state and lets go what they
/// allow: after the account's limits for the key changed (a consumer's are applied by a trigger on
/// `consumers`, in the change's own transaction).
async fn apply(db: impl PgExecutor<'_>, queue: OwnedQueue, key: &str) -> Result<(), sqlx::Error> {
    sqlx::query("select flow_apply_limits(q.id, $3) from queues q where q.id = $1 and q.account_id = $2")
        .bind(queue.id())
        .bind(queue.account())
        .bind(key)
        .execute(db)
        .await?;
    Ok(())
}

/// Forgets up to `limit` keys that have no messages and whose rate would let a message go at once;
/// returns how many. SKIP LOCKED, so that it never waits on a publish or an ack of the key.
pub async fn forget_idle(db: impl PgExecutor<'_>, limit: i64) -> Result<u64, sqlx::Error> {
    let deleted = sqlx::query(
        "delete from flow_keys where (queue_id, flow_key) in (
             select queue_id, flow_key from flow_keys
             where released = 0 and held = 0 and next_at <= now()
             limit $1 for update skip locked)",
    )
    .bind(limit)
    .execute(db)
    .await?;
    Ok(deleted.rows_affected())
}

/// Lets go what up to `limit` keys holding messages back now allow, their rows taken in key order with
/// SKIP LOCKED (a key being published to or acked is let go by that statement); returns the queues of
/// the keys it looked at. A key's messages are let go as its let-go messages leave; this covers the rest:
/// a rate's next time coming while none of the key's messages leaves (one deleted before its time).
pub async fn release_due(db: impl PgExecutor<'_>, limit: i64) -> Result<Vec<QueueId>, sqlx::Error> {
    sqlx::query_scalar(
        "with due as (
             select f.queue_id, f.flow_key from flow_keys f
             where f.held > 0 and not f.paused and f.released < coalesce(f.parallelism, f.released + 1)
               and (f.rate is null or f.next_at <= now() + f.period)
             order by f.queue_id, f.flow_key
             limit $1 for update skip locked),
         released as materialized (select flow_release_keys(array_agg(d.queue_id), array_agg(d.flow_key)) from due d)
         select distinct d.queue_id from due d, released",
    )
    .bind(limit)
    .fetch_all(db)
    .await
}
