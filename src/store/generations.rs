//! The generations of `messages` and `message_bodies` (migration `…01_message_generations`): young
//! generations 0 and 1 take turns being the current one, into which publishes store; the other drains and
//! is truncated once empty, its few long-lived messages moved to the old generation, 2. The rotation's
//! statements, across accounts: background work that answers no tenant.

use sqlx::PgConnection;

/// The advisory lock that one node at a time turns the rotation under.
pub const ROTATION_LOCK: &str = "skiplock message generations";
/// The old generation, never truncated.
pub const OLD: i16 = 2;
/// The partitions of each young generation, by generation (the statements below name them).
const YOUNG: [(&str, &str); 2] = [("messages_0", "message_bodies_0"), ("messages_1", "message_bodies_1")];

/// A young generation as the rotation reads it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Generation {
    pub gen: i16,
    /// `current`, `draining` or `empty`.
    pub state: String,
    /// Seconds since it took its state.
    pub age_seconds: f64,
}

/// Takes the rotation for this transaction, unless another node has it; then the young generations,
/// locked until the transaction ends.
pub async fn take(conn: &mut PgConnection) -> Result<Option<Vec<Generation>>, sqlx::Error> {
    let taken: bool = sqlx::query_scalar("select pg_try_advisory_xact_lock(hashtext($1))")
        .bind(ROTATION_LOCK)
        .fetch_one(&mut *conn)
        .await?;
    if !taken {
        return Ok(None);
    }
    let young = sqlx::query_as(
        "select gen, state, extract(epoch from now() - since)::float8 as age_seconds
         from message_generations where state <> 'old' order by gen for update",
    )
    .fetch_all(&mut *conn)
    .await?;
    Ok(Some(young))
}

/// Makes `next` (an empty generation) the current one and the current one `previous` draining.
pub async fn switch(conn: &mut PgConnection, previous: i16, next: i16) -> Result<(), sqlx::Error> {
    sqlx::query(
        "update message_generations set since = now(),
             state = case gen when $1 then 'draining' when $2 then 'current' end
         where gen in ($1, $2)",
    )
    .bind(previous)
    .bind(next)
    .execute(conn)
    .await?;
    Ok(())
}

/// Truncates the draining generation `gen` if it holds no message, and marks it empty; false when it holds
/// messages still, or when its tables are in use beyond `lock_timeout_ms` (a long statement, a vacuum, a
/// `pg_dump`), which leaves it as it was. The bodies a generation holds without messages are those its
/// fanned-out messages shared, which no delete removes (the `consumer_lanes` migration): they go with it.
pub async fn truncate_if_empty(conn: &mut PgConnection, gen: i16, lock_timeout_ms: u32) -> Result<bool, sqlx::Error> {
    let (messages, bodies) = YOUNG[gen as usize];
    let holds = format!("select exists (select 1 from {messages})");
    // Looked at first without the lock: while a backlog drains, the lock taken each turn only to find
    // messages would stop every claim and ack of the generation for as long as it waits and is held.
    if sqlx::query_scalar::<_, bool>(&holds).fetch_one(&mut *conn).await? {
        return Ok(false);
    }
    if !lock_young(conn, gen, "access exclusive", lock_timeout_ms).await? {
        return Ok(false);
    }
    // Again under the lock, which waited for any publish that found the generation still current.
    if sqlx::query_scalar::<_, bool>(&holds).fetch_one(&mut *conn).await? {
        return Ok(false);
    }
    sqlx::query(&format!("truncate {messages}, {bodies}")).execute(&mut *conn).await?;
    sqlx::query("update message_generations set state = 'empty', since = now() where gen = $1")
        .bind(gen)
        .execute(&mut *conn)
        .await?;
    Ok(true)
}

/// Locks the young generation `gen`'s tables in `mode` until the caller's transaction ends, waiting at
/// most `lock_timeout_ms`; false when they are in use beyond that (in a savepoint, so that the caller's
/// transaction goes on).
async fn lock_young(conn: &mut PgConnection, gen: i16, mode: &str, lock_timeout_ms: u32) -> Result<bool, sqlx::Error> {
    let (messages, bodies) = YOUNG[gen as usize];
    sqlx::query("savepoint locking").execute(&mut *conn).await?;
    sqlx::query(&format!("set local lock_timeout = {lock_timeout_ms}")).execute(&mut *conn).await?;
    match sqlx::query(&format!("lock table {messages}, {bodies} in {mode} mode")).execute(&mut *conn).await {
        Ok(_) => {
            sqlx::query("release savepoint locking").execute(&mut *conn).await?;
            sqlx::query("set local lock_timeout = 0").execute(&mut *conn).await?;
            Ok(true)
        }
        // lock_not_available: try again at the next turn.
        Err(sqlx::Error::Database(db)) if db.code().as_deref() == Some("55P03") => {
            sqlx::query("rollback to savepoint locking").execute(&mut *conn).await?;
            Ok(false)
        }
        Err(err) => Err(err),
    }
}

/// How many messages the draining generation `gen` still holds, counted up to `max + 1`.
pub async fn holds(conn: &mut PgConnection, gen: i16, max: i64) -> Result<i64, sqlx::Error> {
    let (messages, _) = YOUNG[gen as usize];
    sqlx::query_scalar(&format!("select count(*) from (select 1 from {messages} limit $1) t"))
        .bind(max + 1)
        .fetch_one(conn)
        .await
}

/// Moves up to `limit` of the draining generation `gen`'s messages, with their bodies, to the old
/// generation; returns how many moved. A copy of a fanned-out message gets a body of its own there, under
/// its own id, so that nothing in the old generation, which only vacuum cleans, is shared; it keeps
/// `body_id`, the id it was published under, which every consumer sees (`store::messages`, `body_key!`).
/// The copies left behind keep sharing theirs. Moving a row between partitions fires no insert or delete
/// trigger, so counts and keys stay as they are. The generation's tables are locked against writes
/// first (waiting at most `lock_timeout_ms`, else nothing moves this turn): a statement that found a row
/// before it moved and then locked it (a claim, an ack, a key's release) would fail with "tuple to be
/// locked was already moved to another partition", where now it waits and finds the row moved.
pub async fn move_to_old(
    conn: &mut PgConnection,
    gen: i16,
    limit: i64,
    lock_timeout_ms: u32,
) -> Result<u64, sqlx::Error> {
    let (messages, _) = YOUNG[gen as usize];
    if !lock_young(conn, gen, "exclusive", lock_timeout_ms).await? {
        return Ok(0);
    }
    let moved: Vec<(uuid::Uuid, Option<uuid::Uuid>)> = sqlx::query_as(&format!(
        "with moving as (select id from {messages} order by id limit $2 for update skip locked)
         update messages m set gen = $3 from moving where m.gen = $1 and m.id = moving.id
         returning m.id, m.body_id"
    ))
    .bind(gen)
    .bind(limit)
    .bind(OLD)
    .fetch_all(&mut *conn)
    .await?;
    let count = moved.len() as u64;
    let (own, shared): (Vec<_>, Vec<_>) = moved.into_iter().partition(|(_, body)| body.is_none());
    let own: Vec<uuid::Uuid> = own.into_iter().map(|(id, _)| id).collect();
    let (copies, bodies): (Vec<uuid::Uuid>, Vec<Option<uuid::Uuid>>) = shared.into_iter().unzip();
    sqlx::query(
        "with own as (update message_bodies set gen = $3 where gen = $1 and id = any($2))
         insert into message_bodies (id, content_type, body, gen)
         select c.id, b.content_type, b.body, $3
         from unnest($4::uuid[], $5::uuid[]) as c(id, body_id) join message_bodies b on b.gen = $1 and b.id = c.body_id",
    )
    .bind(gen)
    .bind(&own)
    .bind(OLD)
    .bind(&copies)
    .bind(&bodies)
    .execute(conn)
    .await?;
    Ok(count)
}
