//! The webhook attempt log and the endpoints' health: attempts written in batches with the health they
//! change, read by consumer or by message, and pruned by age and by rows per consumer.

use chrono::{DateTime, Utc};
use sqlx::postgres::PgArguments;
use sqlx::query::QueryAs;
use sqlx::{PgConnection, PgExecutor, PgPool, Postgres};
use uuid::Uuid;

use crate::ids::{AccountId, ConsumerId, MessageId, QueueId};
use crate::queue::attempt::AttemptOutcome;
use crate::store::owned::OwnedQueue;

/// One attempt, as it is written and read.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct AttemptRow {
    pub id: i64,
    pub account_id: AccountId,
    pub queue_id: QueueId,
    pub consumer_id: ConsumerId,
    pub attempted_at: DateTime<Utc>,
    pub node: Uuid,
    pub test: bool,
    pub batch_size: i32,
    pub message_ids: Vec<Uuid>,
    pub outcome: String,
    pub status: Option<i32>,
    pub latency_ms: i32,
    pub response: Option<String>,
    pub error: Option<String>,
}

/// What a run of attempts did to one endpoint's health: written with the attempts.
#[derive(Debug, Clone)]
pub struct HealthChange {
    pub account: AccountId,
    pub queue: QueueId,
    pub consumer: ConsumerId,
    /// Failures after the run's last success, or in the whole run when none succeeded.
    pub trailing_failures: i32,
    /// The run's last success: when there is one, the count starts again from `trailing_failures`.
    pub last_success_at: Option<DateTime<Utc>>,
    /// The first of the trailing failures.
    pub failing_since: Option<DateTime<Utc>>,
    /// The run's last failure.
    pub last_failure: Option<AttemptRow>,
}

/// An endpoint's consecutive failures before and after a write of its attempts.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct HealthWritten {
    pub consumer_id: ConsumerId,
    pub before: i32,
    pub after: i32,
    pub failing_since: Option<DateTime<Utc>>,
}

/// Locks the health rows of `consumers` in key order for the caller's transaction, answering their
/// consecutive failures: what a write that follows adds to. (A lock taken in the statement that updates
/// the row would not see it: a row the same statement changed is skipped.)
async fn lock_health(conn: &mut PgConnection, consumers: &[ConsumerId]) -> Result<Vec<(ConsumerId, i32)>, sqlx::Error> {
    sqlx::query_as(
        "select consumer_id, consecutive_failures from webhook_health
         where consumer_id = any($1) order by consumer_id for update",
    )
    .bind(consumers.iter().map(|c| c.0).collect::<Vec<_>>())
    .fetch_all(conn)
    .await
}

/// Writes `attempts` (their `id` is ignored) and the health changes they make in the caller's
/// transaction; attempts of a consumer deleted meanwhile are dropped. Answers each endpoint's failures in
/// a row before and after.
pub async fn write(
    conn: &mut PgConnection,
    attempts: &[AttemptRow],
    health: &[HealthChange],
) -> Result<Vec<HealthWritten>, sqlx::Error> {
    let consumers: Vec<ConsumerId> = health.iter().map(|h| h.consumer).collect();
    let before = lock_health(&mut *conn, &consumers).await?;
    let written: Vec<(ConsumerId, i32, Option<DateTime<Utc>>)> = write_rows(conn, attempts, health).await?;
    Ok(written
        .into_iter()
        .map(|(consumer_id, after, failing_since)| HealthWritten {
            consumer_id,
            before: before.iter().find(|(c, _)| *c == consumer_id).map_or(0, |(_, failures)| *failures),
            after,
            failing_since,
        })
        .collect())
}

/// The statement of `write`.
async fn write_rows(
    conn: &mut PgConnection,
    attempts: &[AttemptRow],
    health: &[HealthChange],
) -> Result<Vec<(ConsumerId, i32, Option<DateTime<Utc>>)>, sqlx::Error> {
    let col = |f: fn(&AttemptRow) -> Uuid| attempts.iter().map(f).collect::<Vec<_>>();
    // One array of ids per attempt, as text: Postgres has no array of arrays of varying length.
    let ids: Vec<String> = attempts
        .iter()
        .map(|a| format!("{{{}}}", a.message_ids.iter().map(Uuid::to_string).collect::<Vec<_>>().join(",")))
        .collect();
    fn fail(h: &HealthChange) -> Option<&AttemptRow> {
        h.last_failure.as_ref()
    }
    sqlx::query_as(
        "with attempts as (
             insert into webhook_attempts (account_id, queue_id, consumer_id, attempted_at, node, test, batch_size,
                                           message_ids, outcome, status, latency_ms, response, error)
             select a.account_id, a.queue_id, a.consumer_id, a.attempted_at, a.node, a.test, a.batch_size,
                    a.message_ids::uuid[], a.outcome, a.status, a.latency_ms, a.response, a.error
             from unnest($1::uuid[], $2::uuid[], $3::uuid[], $4::timestamptz[], $5::uuid[], $6::boolean[],
                         $7::int[], $8::text[], $9::text[], $10::int[], $11::int[], $12::text[], $13::text[])
                  as a(account_id, queue_id, consumer_id, attempted_at, node, test, batch_size, message_ids,
                       outcome, status, latency_ms, response, error)
             join consumers c on c.id = a.consumer_id and c.account_id = a.account_id
         ),
         written as (
         insert into webhook_health as h (consumer_id, account_id, consecutive_failures, failing_since,
                                          last_success_at, last_failure_at, last_failure_outcome,
                                          last_failure_status, last_failure_error)
         select n.consumer_id, n.account_id, n.failures, n.failing_since, n.last_success_at, n.last_failure_at,
                n.outcome, n.status, n.error
         from unnest($14::uuid[], $15::uuid[], $16::int[], $17::timestamptz[], $18::timestamptz[],
                     $19::timestamptz[], $20::text[], $21::int[], $22::text[])
              as n(consumer_id, account_id, failures, failing_since, last_success_at, last_failure_at, outcome,
                   status, error)
         join consumers c on c.id = n.consumer_id and c.account_id = n.account_id
         on conflict (consumer_id) do update set
             consecutive_failures = case when excluded.last_success_at is not null then excluded.consecutive_failures
                                         else h.consecutive_failures + excluded.consecutive_failures end,
             failing_since = case when excluded.last_success_at is not null then excluded.failing_since
                                  else coalesce(h.failing_since, excluded.failing_since) end,
             last_success_at = coalesce(excluded.last_success_at, h.last_success_at),
             last_failure_at = coalesce(excluded.last_failure_at, h.last_failure_at),
             last_failure_outcome = coalesce(excluded.last_failure_outcome, h.last_failure_outcome),
             last_failure_status = case when excluded.last_failure_at is not null then excluded.last_failure_status
                                        else h.last_failure_status end,
             last_failure_error = case when excluded.last_failure_at is not null then excluded.last_failure_error
                                       else h.last_failure_error end
         returning h.consumer_id, h.consecutive_failures, h.failing_since)
         select consumer_id, consecutive_failures, failing_since from written",
    )
    .bind(col(|a| a.account_id.0))
    .bind(col(|a| a.queue_id.0))
    .bind(col(|a| a.consumer_id.0))
    .bind(attempts.iter().map(|a| a.attempted_at).collect::<Vec<_>>())
    .bind(col(|a| a.node))
    .bind(attempts.iter().map(|a| a.test).collect::<Vec<_>>())
    .bind(attempts.iter().map(|a| a.batch_size).collect::<Vec<_>>())
    .bind(ids)
    .bind(attempts.iter().map(|a| a.outcome.clone()).collect::<Vec<_>>())
    .bind(attempts.iter().map(|a| a.status).collect::<Vec<_>>())
    .bind(attempts.iter().map(|a| a.latency_ms).collect::<Vec<_>>())
    .bind(attempts.iter().map(|a| a.response.clone()).collect::<Vec<_>>())
    .bind(attempts.iter().map(|a| a.error.clone()).collect::<Vec<_>>())
    .bind(health.iter().map(|h| h.consumer.0).collect::<Vec<_>>())
    .bind(health.iter().map(|h| h.account.0).collect::<Vec<_>>())
    .bind(health.iter().map(|h| h.trailing_failures).collect::<Vec<_>>())
    .bind(health.iter().map(|h| h.failing_since).collect::<Vec<_>>())
    .bind(health.iter().map(|h| h.last_success_at).collect::<Vec<_>>())
    .bind(health.iter().map(|h| fail(h).map(|f| f.attempted_at)).collect::<Vec<_>>())
    .bind(health.iter().map(|h| fail(h).map(|f| f.outcome.clone())).collect::<Vec<_>>())
    .bind(health.iter().map(|h| fail(h).and_then(|f| f.status)).collect::<Vec<_>>())
    .bind(health.iter().map(|h| fail(h).and_then(|f| f.error.clone())).collect::<Vec<_>>())
    .fetch_all(conn)
    .await
}

/// What a read of the attempt log keeps.
#[derive(Debug, Clone, Default)]
pub struct AttemptFilter {
    pub since: Option<DateTime<Utc>>,
    pub until: Option<DateTime<Utc>>,
    pub outcome: Option<AttemptOutcome>,
    pub message: Option<MessageId>,
}

/// The attempts of the account's ($1) queue ($2) a read keeps: one consumer's ($3), within a time ($4, $5),
/// of one outcome ($6), with one message ($7); each filter null to keep all.
macro_rules! matching_attempts {
    () => {
        "from webhook_attempts
         where account_id = $1 and queue_id = $2 and ($3::uuid is null or consumer_id = $3)
           and ($4::timestamptz is null or attempted_at >= $4) and ($5::timestamptz is null or attempted_at < $5)
           and ($6::text is null or outcome = $6) and ($7::uuid is null or message_ids @> array[$7::uuid])"
    };
}

/// A page of the attempts of the queue's consumers `consumers` (all of them when None), newest first, and
/// how many match in all.
pub async fn list(
    pool: &PgPool,
    queue: OwnedQueue,
    consumer: Option<ConsumerId>,
    filter: &AttemptFilter,
    limit: i64,
    offset: i64,
) -> Result<(Vec<AttemptRow>, i64), sqlx::Error> {
    let rows = sqlx::query_as(concat!(
        "select id, account_id, queue_id, consumer_id, attempted_at, node, test, batch_size, message_ids, outcome,
                status, latency_ms, response, error ",
        matching_attempts!(),
        " order by attempted_at desc, id desc limit $8 offset $9"
    ));
    let rows = filtered(rows, queue, consumer, filter).bind(limit).bind(offset).fetch_all(pool).await?;
    let total = sqlx::query_as(concat!("select count(*) ", matching_attempts!()));
    let (total,): (i64,) = filtered(total, queue, consumer, filter).fetch_one(pool).await?;
    Ok((rows, total))
}

/// `query` with the parameters of `matching_attempts!` bound.
fn filtered<'q, O>(
    query: QueryAs<'q, Postgres, O, PgArguments>,
    queue: OwnedQueue,
    consumer: Option<ConsumerId>,
    filter: &AttemptFilter,
) -> QueryAs<'q, Postgres, O, PgArguments> {
    query
        .bind(queue.account().0)
        .bind(queue.id().0)
        .bind(consumer.map(|c| c.0))
        .bind(filter.since)
        .bind(filter.until)
        .bind(filter.outcome.map(AttemptOutcome::as_str))
        .bind(filter.message.map(|m| m.0))
}

/// One endpoint's health, as stored.
#[derive(Debug, Clone, Default, PartialEq, sqlx::FromRow)]
pub struct HealthRow {
    pub consumer_id: Uuid,
    pub consecutive_failures: i32,
    pub failing_since: Option<DateTime<Utc>>,
    pub last_success_at: Option<DateTime<Utc>>,
    pub last_failure_at: Option<DateTime<Utc>>,
    pub last_failure_outcome: Option<String>,
    pub last_failure_status: Option<i32>,
    pub last_failure_error: Option<String>,
    /// Set when the consumer was disabled for failing its `disable_after_hours`.
    pub disabled_at: Option<DateTime<Utc>>,
}

/// The health of the account's consumers `consumers` that have had an attempt.
pub async fn health(
    db: impl PgExecutor<'_>,
    account: AccountId,
    consumers: &[ConsumerId],
) -> Result<Vec<HealthRow>, sqlx::Error> {
    let ids: Vec<Uuid> = consumers.iter().map(|c| c.0).collect();
    sqlx::query_as(
        "select consumer_id, consecutive_failures, failing_since, last_success_at, last_failure_at,
                last_failure_outcome, last_failure_status, last_failure_error, disabled_at
         from webhook_health where account_id = $1 and consumer_id = any($2)",
    )
    .bind(account.0)
    .bind(ids)
    .fetch_all(db)
    .await
}

/// Marks the consumer's endpoint healthy at once (a probe or a test send succeeded; a disabled consumer is
/// enabled again), so that every node reading it resumes delivery before this node's log is written;
/// answers its consecutive failures before, or None when the queue has no such consumer.
pub async fn mark_healthy(
    conn: &mut PgConnection,
    queue: OwnedQueue,
    consumer: ConsumerId,
) -> Result<Option<i32>, sqlx::Error> {
    let before = lock_health(&mut *conn, &[consumer]).await?;
    let marked: Option<ConsumerId> = sqlx::query_scalar(
        "insert into webhook_health (consumer_id, account_id, last_success_at)
         select c.id, c.account_id, now() from consumers c where c.id = $2 and c.account_id = $1 and c.queue_id = $3
         on conflict (consumer_id) do update
             set consecutive_failures = 0, failing_since = null, last_success_at = excluded.last_success_at,
                 disabled_at = null
         returning consumer_id",
    )
    .bind(queue.account().0)
    .bind(consumer.0)
    .bind(queue.id().0)
    .fetch_optional(conn)
    .await?;
    Ok(marked.map(|_| before.first().map_or(0, |(_, failures)| *failures)))
}

/// Deletes attempts older than `days`, a bounded batch at a time; answers how many went.
pub async fn prune_older(pool: &PgPool, days: f64, batch: i64) -> Result<u64, sqlx::Error> {
    let gone = sqlx::query(
        "delete from webhook_attempts where (consumer_id, id) in (
             select consumer_id, id from webhook_attempts
             where attempted_at < now() - make_interval(secs => $1 * 86400) limit $2)",
    )
    .bind(days)
    .bind(batch)
    .execute(pool)
    .await?;
    Ok(gone.rows_affected())
}

/// Deletes each consumer's attempts beyond its newest `kept`, a bounded batch at a time.
pub async fn prune_beyond(pool: &PgPool, kept: i64, batch: i64) -> Result<u64, sqlx::Error> {
    // A consumer's attempts are walked along the primary key from its newest: only consumers over the
    // bound pay more than one probe.
    let gone = sqlx::query(
        "delete from webhook_attempts w where (w.consumer_id, w.id) in (
             select o.consumer_id, o.id from (select id as consumer_id from consumers where kind = 'webhook') c
             cross join lateral (select id from webhook_attempts a where a.consumer_id = c.consumer_id
                                 order by id desc offset $1 limit 1) cut
             cross join lateral (select a.consumer_id, a.id from webhook_attempts a
                                 where a.consumer_id = c.consumer_id and a.id <= cut.id limit $2) o
             limit $2)",
    )
    .bind(kept)
    .bind(batch)
    .execute(pool)
    .await?;
    Ok(gone.rows_affected())
}
