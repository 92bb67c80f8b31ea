//! Schedules: their rows, scoped by account, and the two statements of firing one: taking due schedules
//! (each held by one node for a while) and recording a tick, which moves the schedule on only while the
//! node still holds it.

use chrono::{DateTime, Utc};
use sqlx::postgres::PgRow;
use sqlx::{PgPool, Row};
use uuid::Uuid;

use crate::ids::{AccountId, QueueId, ScheduleId};
use crate::store::owned::OwnedQueue;

/// A schedule as stored.
#[derive(Debug, Clone)]
pub struct Schedule {
    pub id: ScheduleId,
    pub queue: OwnedQueue,
    pub cron: Option<String>,
    pub time_zone: String,
    pub interval_seconds: Option<i64>,
    pub anchor_at: DateTime<Utc>,
    pub content_type: i16,
    pub body: Vec<u8>,
    pub delay_seconds: Option<i32>,
    pub idempotency_key: Option<String>,
    pub paused: bool,
    pub next_run_at: Option<DateTime<Utc>>,
    pub last_run_at: Option<DateTime<Utc>>,
    pub last_error: Option<String>,
    pub runs: i64,
    pub created_at: DateTime<Utc>,
    pub modified_at: DateTime<Utc>,
}

/// A schedule's columns, as `schedule` reads them (a macro, so that each statement is one literal).
macro_rules! columns {
    () => {
        "id, account_id, queue_id, cron, time_zone, interval_seconds, anchor_at, content_type, body, delay_seconds, \
         idempotency_key, paused, next_run_at, last_run_at, last_error, runs, created_at, modified_at"
    };
}

fn schedule(row: PgRow) -> Schedule {
    Schedule {
        id: ScheduleId(row.get("id")),
        queue: OwnedQueue::vouched(AccountId(row.get("account_id")), QueueId(row.get("queue_id"))),
        cron: row.get("cron"),
        time_zone: row.get("time_zone"),
        interval_seconds: row.get("interval_seconds"),
        anchor_at: row.get("anchor_at"),
        content_type: row.get("content_type"),
        body: row.get("body"),
        delay_seconds: row.get("delay_seconds"),
        idempotency_key: row.get("idempotency_key"),
        paused: row.get("paused"),
        next_run_at: row.get("next_run_at"),
        last_run_at: row.get("last_run_at"),
        last_error: row.get("last_error"),
        runs: row.get("runs"),
        created_at: row.get("created_at"),
        modified_at: row.get("modified_at"),
    }
}

/// `statement` with the schedule's account and id as $1 and $2 and its stored fields from $3 on, in the
/// order of `create` and `save`.
fn with_fields<'q>(
    statement: &'q str,
    s: &'q Schedule,
) -> sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments> {
    sqlx::query(statement)
        .bind(s.queue.account().0)
        .bind(s.id.0)
        .bind(s.queue.id().0)
        .bind(&s.cron)
        .bind(&s.time_zone)
        .bind(s.interval_seconds)
        .bind(s.anchor_at)
        .bind(s.content_type)
        .bind(&s.body)
        .bind(s.delay_seconds)
        .bind(&s.idempotency_key)
        .bind(s.paused)
        .bind(s.next_run_at)
}

/// Stores a new schedule (its id, queue, cadence, message and first run as given).
pub async fn create(pool: &PgPool, s: &Schedule) -> Result<Schedule, sqlx::Error> {
    let statement = concat!(
        "insert into schedules (account_id, id, queue_id, cron, time_zone, interval_seconds, anchor_at, content_type,
                                body, delay_seconds, idempotency_key, paused, next_run_at)
         values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
         returning ",
        columns!()
    );
    with_fields(statement, s).fetch_one(pool).await.map(schedule)
}

/// Writes what a tenant may change (the queue, cadence, message, paused, next run) over the account's
/// schedule; None when it has no such schedule. A node firing it meanwhile loses its hold, so that the
/// tick it records cannot overwrite the change.
pub async fn save(pool: &PgPool, s: &Schedule) -> Result<Option<Schedule>, sqlx::Error> {
    let statement = concat!(
        "update schedules set queue_id = $3, cron = $4, time_zone = $5, interval_seconds = $6, anchor_at = $7,
                content_type = $8, body = $9, delay_seconds = $10, idempotency_key = $11, paused = $12,
                next_run_at = $13, modified_at = now(), held_by = null, held_until = null
         where account_id = $1 and id = $2
         returning ",
        columns!()
    );
    with_fields(statement, s).fetch_optional(pool).await.map(|row| row.map(schedule))
}

pub async fn get(pool: &PgPool, account: AccountId, id: ScheduleId) -> Result<Option<Schedule>, sqlx::Error> {
    let statement = concat!("select ", columns!(), " from schedules where account_id = $1 and id = $2");
    sqlx::query(statement).bind(account.0).bind(id.0).fetch_optional(pool).await.map(|row| row.map(schedule))
}

/// A page of the account's schedules, oldest first, and how many it has.
pub async fn list(
    pool: &PgPool,
    account: AccountId,
    limit: i64,
    offset: i64,
) -> Result<(Vec<Schedule>, i64), sqlx::Error> {
    let statement = concat!(
        "select ",
        columns!(),
        " from schedules where account_id = $1 order by created_at, id limit $2 offset $3"
    );
    let rows = sqlx::query(statement).bind(account.0).bind(limit).bind(offset).fetch_all(pool).await?;
    let total = count(pool, account).await?;
    Ok((rows.into_iter().map(schedule).collect(), total))
}

/// How many schedules the account has.
pub async fn count(pool: &PgPool, account: AccountId) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar("select count(*) from schedules where account_id = $1").bind(account.0).fetch_one(pool).await
}

/// Deletes the account's schedule; false when it has no such schedule.
pub async fn delete(pool: &PgPool, account: AccountId, id: ScheduleId) -> Result<bool, sqlx::Error> {
    let done = sqlx::query("delete from schedules where account_id = $1 and id = $2")
        .bind(account.0)
        .bind(id.0)
        .execute(pool)
        .await?;
    Ok(done.rows_affected() == 1)
}

/// Takes up to `limit` schedules due within `lead_seconds` that no node holds (or whose holder's hold ran
/// out), holding each for `node` until `hold_seconds` after its tick, earliest due first.
pub async fn take_due(
    pool: &PgPool,
    node: Uuid,
    limit: i64,
    lead_seconds: f64,
    hold_seconds: f64,
) -> Result<Vec<Schedule>, sqlx::Error> {
    let statement = concat!(
        "update schedules set held_by = $1, held_until = greatest(next_run_at, now()) + make_interval(secs => $4)
         where id in (select id from schedules
                      where not paused and next_run_at <= now() + make_interval(secs => $3)
                        and (held_until is null or held_until < now())
                      order by next_run_at limit $2 for update skip locked)
         returning ",
        columns!()
    );
    let rows =
        sqlx::query(statement).bind(node).bind(limit).bind(lead_seconds).bind(hold_seconds).fetch_all(pool).await?;
    Ok(rows.into_iter().map(schedule).collect())
}

/// Which of `ids` `node` still holds: a schedule paused, changed or deleted since it was taken is not.
pub async fn still_held(pool: &PgPool, node: Uuid, ids: &[ScheduleId]) -> Result<Vec<ScheduleId>, sqlx::Error> {
    let ids: Vec<Uuid> = ids.iter().map(|id| id.0).collect();
    let held: Vec<Uuid> = sqlx::query_scalar("select id from schedules where id = any($2) and held_by = $1")
        .bind(node)
        .bind(&ids)
        .fetch_all(pool)
        .await?;
    Ok(held.into_iter().map(ScheduleId).collect())
}

/// How one tick of a schedule went.
pub struct Fired {
    pub id: ScheduleId,
    pub tick: DateTime<Utc>,
    /// The schedule's next run; None when its cron expression never matches again.
    pub next: Option<DateTime<Utc>>,
    /// Whether the tick's message was stored (or found stored, a tick fired twice).
    pub stored: bool,
    pub error: Option<String>,
}

/// Records ticks of schedules `node` holds and lets them go, in one statement; answers how many it
/// recorded: a schedule `node` no longer holds (its hold ran out and another node took it, or the tenant
/// changed or deleted it meanwhile) is left as it is.
/// `s.id = any($2)` finds the rows by their key: with the ticks' array alone, a generic plan may scan every
/// row the node holds for each tick (seconds, once it holds ten thousand).
pub async fn fired(pool: &PgPool, node: Uuid, ticks: &[Fired]) -> Result<u64, sqlx::Error> {
    let ids: Vec<Uuid> = ticks.iter().map(|t| t.id.0).collect();
    let at: Vec<DateTime<Utc>> = ticks.iter().map(|t| t.tick).collect();
    let next: Vec<Option<DateTime<Utc>>> = ticks.iter().map(|t| t.next).collect();
    let ran: Vec<i32> = ticks.iter().map(|t| i32::from(t.stored)).collect();
    let errors: Vec<Option<String>> = ticks.iter().map(|t| t.error.clone()).collect();
    let done = sqlx::query(
        "update schedules s set next_run_at = t.next, last_run_at = t.tick, runs = s.runs + t.ran,
                last_error = t.error, held_by = null, held_until = null
         from unnest($2::uuid[], $3::timestamptz[], $4::timestamptz[], $5::int[], $6::text[])
              as t(id, tick, next, ran, error)
         where s.id = any($2) and s.id = t.id and s.held_by = $1",
    )
    .bind(node)
    .bind(&ids)
    .bind(&at)
    .bind(&next)
    .bind(&ran)
    .bind(&errors)
    .execute(pool)
    .await?;
    Ok(done.rows_affected())
}

/// When the earliest schedule that no node holds (or whose holder's hold ran out) comes due, if any does.
pub async fn next_due(pool: &PgPool) -> Result<Option<DateTime<Utc>>, sqlx::Error> {
    sqlx::query_scalar(
        "select min(next_run_at) from schedules where not paused and (held_until is null or held_until < now())",
    )
    .fetch_one(pool)
    .await
}
