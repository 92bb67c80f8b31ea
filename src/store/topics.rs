//! Topics and their bindings, scoped by account, and the one read a topic publish makes to learn which
//! queues its routing key may reach.

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::postgres::PgRow;
use sqlx::{PgExecutor, PgPool, Row};
use uuid::Uuid;

use crate::ids::{AccountId, BindingId, QueueId, TopicId};
use crate::store::owned::OwnedQueue;

/// A topic as stored, with how many bindings it has.
#[derive(Debug, Clone)]
pub struct Topic {
    pub id: TopicId,
    pub name: String,
    pub binding_count: i64,
    pub created_at: DateTime<Utc>,
    pub modified_at: DateTime<Utc>,
}

/// A binding as stored, with its queue's name.
#[derive(Debug, Clone)]
pub struct Binding {
    pub id: BindingId,
    pub topic: TopicId,
    pub queue: OwnedQueue,
    pub queue_name: String,
    pub pattern: String,
    pub filter: Option<Value>,
    pub created_at: DateTime<Utc>,
}

/// A topic's columns with its binding count (`t`).
macro_rules! topic_columns {
    () => {
        "t.id, t.name, t.created_at, t.modified_at,
         (select count(*) from topic_bindings b where b.topic_id = t.id) as binding_count"
    };
}

/// A binding's columns with its queue's name (`b`, `q`).
macro_rules! binding_columns {
    () => {
        "b.id, b.account_id, b.topic_id, b.queue_id, q.name as queue_name, b.pattern, b.filter, b.created_at"
    };
}

fn topic(row: PgRow) -> Topic {
    Topic {
        id: TopicId(row.get("id")),
        name: row.get("name"),
        binding_count: row.get("binding_count"),
        created_at: row.get("created_at"),
        modified_at: row.get("modified_at"),
    }
}

fn binding(row: PgRow) -> Binding {
    Binding {
        id: BindingId(row.get("id")),
        topic: TopicId(row.get("topic_id")),
        queue: OwnedQueue::vouched(AccountId(row.get("account_id")), QueueId(row.get("queue_id"))),
        queue_name: row.get("queue_name"),
        pattern: row.get("pattern"),
        filter: row.get("filter"),
        created_at: row.get("created_at"),
    }
}

/// Stores a new topic of the account's; None when the account has a topic of that name.
pub async fn create(pool: &PgPool, account: AccountId, name: &str) -> Result<Option<Topic>, sqlx::Error> {
    let statement = concat!(
        "with t as (insert into topics (id, account_id, name) values ($1, $2, $3)
                    on conflict (account_id, name) do nothing
                    returning *)
         select ",
        topic_columns!(),
        " from t"
    );
    sqlx::query(statement)
        .bind(TopicId::new().0)
        .bind(account.0)
        .bind(name)
        .fetch_optional(pool)
        .await
        .map(|row| row.map(topic))
}

pub async fn get(pool: &PgPool, account: AccountId, id: TopicId) -> Result<Option<Topic>, sqlx::Error> {
    let statement = concat!("select ", topic_columns!(), " from topics t where t.account_id = $1 and t.id = $2");
    sqlx::query(statement).bind(account.0).bind(id.0).fetch_optional(pool).await.map(|row| row.map(topic))
}

/// A page of the account's topics by name.
pub async fn page(pool: &PgPool, account: AccountId, limit: i64, offset: i64) -> Result<Vec<Topic>, sqlx::Error> {
    let statement = concat!(
        "select ",
        topic_columns!(),
        " from topics t where t.account_id = $1 order by t.name limit $2 offset $3"
    );
    let rows = sqlx::query(statement).bind(account.0).bind(limit).bind(offset).fetch_all(pool).await?;
    Ok(rows.into_iter().map(topic).collect())
}

/// How many topics the account has.
pub async fn count(pool: &PgPool, account: AccountId) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar("select count(*) from topics where account_id = $1").bind(account.0).fetch_one(pool).await
}

/// Deletes the account's topic and its bindings; true when it had it.
pub async fn delete(pool: &PgPool, account: AccountId, id: TopicId) -> Result<bool, sqlx::Error> {
    let done = sqlx::query("delete from topics where account_id = $1 and id = $2")
        .bind(account.0)
        .bind(id.0)
        .execute(pool)
        .await?;
    Ok(done.rows_affected() == 1)
}

/// Deletes every topic of the account (its deletion's last step).
pub async fn delete_all(db: impl PgExecutor<'_>, account: AccountId) -> Result<u64, sqlx::Error> {
    Ok(sqlx::query("delete from topics where account_id = $1").bind(account.0).execute(db).await?.rows_affected())
}

/// The topic's bindings, by queue name then pattern.
pub async fn bindings(pool: &PgPool, account: AccountId, id: TopicId) -> Result<Vec<Binding>, sqlx::Error> {
    let statement = concat!(
        "select ",
        binding_columns!(),
        " from topic_bindings b join queues q on q.id = b.queue_id and q.account_id = b.account_id
         where b.account_id = $1 and b.topic_id = $2
         order by q.name, b.pattern, b.id"
    );
    let rows = sqlx::query(statement).bind(account.0).bind(id.0).fetch_all(pool).await?;
    Ok(rows.into_iter().map(binding).collect())
}

/// How many bindings the topic has.
pub async fn count_bindings(pool: &PgPool, account: AccountId, id: TopicId) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar("select count(*) from topic_bindings where account_id = $1 and topic_id = $2")
        .bind(account.0)
        .bind(id.0)
        .fetch_one(pool)
        .await
}

/// Binds the queue to the account's topic by `pattern` and `filter`; None when the topic or the queue is
/// not the account's, or the topic binds the queue by that pattern already.
pub async fn bind(
    pool: &PgPool,
    topic: TopicId,
    queue: OwnedQueue,
    pattern: &str,
    filter: Option<&Value>,
) -> Result<Option<Binding>, sqlx::Error> {
    let statement = concat!(
        "with b as (
             insert into topic_bindings (id, account_id, topic_id, queue_id, pattern, filter)
             select $1, t.account_id, t.id, q.id, $5, $6
             from topics t join queues q on q.account_id = t.account_id
             where t.account_id = $2 and t.id = $3 and q.id = $4
             on conflict (topic_id, queue_id, pattern) do nothing
             returning *)
         select ",
        binding_columns!(),
        " from b join queues q on q.id = b.queue_id"
    );
    sqlx::query(statement)
        .bind(BindingId::new().0)
        .bind(queue.account().0)
        .bind(topic.0)
        .bind(queue.id().0)
        .bind(pattern)
        .bind(filter)
        .fetch_optional(pool)
        .await
        .map(|row| row.map(binding))
}

/// Removes the topic's binding, answering it as it was.
pub async fn unbind(
    pool: &PgPool,
    account: AccountId,
    topic: TopicId,
    id: BindingId,
) -> Result<Option<Binding>, sqlx::Error> {
    let statement = concat!(
        "with b as (delete from topic_bindings where account_id = $1 and topic_id = $2 and id = $3 returning *)
         select ",
        binding_columns!(),
        " from b join queues q on q.id = b.queue_id"
    );
    sqlx::query(statement).bind(account.0).bind(topic.0).bind(id.0).fetch_optional(pool).await.map(|r| r.map(binding))
}

/// A binding as a publish reads it to route.
#[derive(Debug, Clone)]
pub struct Route {
    pub queue: OwnedQueue,
    pub queue_name: String,
    pub pattern: String,
    pub filter: Option<Value>,
}

/// The topic's bindings as a publish routes by them, in one statement; None when the account has no
/// such topic.
pub async fn routes(pool: &PgPool, account: AccountId, id: TopicId) -> Result<Option<Vec<Route>>, sqlx::Error> {
    let rows = sqlx::query(
        "select b.queue_id, q.name as queue_name, b.pattern, b.filter
         from topics t
         left join topic_bindings b on b.topic_id = t.id
         left join queues q on q.id = b.queue_id and q.account_id = t.account_id
         where t.account_id = $1 and t.id = $2",
    )
    .bind(account.0)
    .bind(id.0)
    .fetch_all(pool)
    .await?;
    if rows.is_empty() {
        return Ok(None);
    }
    let routes = rows
        .into_iter()
        .filter_map(|row| {
            let queue: Option<Uuid> = row.get("queue_id");
            let queue_name: Option<String> = row.get("queue_name");
            Some(Route {
                queue: OwnedQueue::vouched(account, QueueId(queue?)),
                queue_name: queue_name?,
                pattern: row.get("pattern"),
                filter: row.get("filter"),
            })
        })
        .collect();
    Ok(Some(routes))
}
