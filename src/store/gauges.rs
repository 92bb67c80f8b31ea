//! The figures behind the per-queue Prometheus gauges, over every account: the queues with the
//! largest backlog one by one, and the rest summed, so that the work follows the queues holding
//! messages and the cap, not the number of queues.

use chrono::{DateTime, Utc};
use sqlx::PgPool;

use crate::ids::AccountId;

/// A queue with its own series, or (`account_id` None) the sum of all the others.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct GaugeRow {
    pub account_id: Option<AccountId>,
    pub queue_name: Option<String>,
    pub backlog_count: i64,
    pub in_flight_count: i64,
    pub delayed_count: i64,
    /// The oldest message of the queue, or of all the others.
    pub oldest: Option<DateTime<Utc>>,
    /// The dead-letter queue's backlog (None when the consumer names no existing queue); for the
    /// others, the sum over those that have one.
    pub dead_letter_backlog_count: Option<i64>,
    /// 1 for a queue; for the others, how many they are.
    pub queues: i64,
}

/// The `max_series` queues with the largest backlog (ties by account and name; empty queues by account
/// and name when fewer hold messages), then one row summing the others. Only queues holding messages
/// are counted one by one: an empty queue has nothing in flight or delayed. The top queues are kept in
/// a bounded heap rather than by sorting every queue.
pub async fn queue_gauges(pool: &PgPool, max_series: i64) -> Result<Vec<GaugeRow>, sqlx::Error> {
    sqlx::query_as(
        "with nonempty as materialized (
             select q.id, q.account_id, q.name, b.messages, b.oldest
             from queue_backlogs b join queues q on q.id = b.queue_id
             where b.messages > 0),
         busiest as (select * from nonempty order by messages desc, account_id, name limit $1),
         idle as (
             select q.id, q.account_id, q.name, 0::int8 as messages, null::timestamptz as oldest
             from queues q
             where not exists (select 1 from nonempty n where n.id = q.id)
             order by q.account_id, q.name
             limit greatest($1 - (select count(*) from busiest), 0)),
         shown as materialized (select * from busiest union all select * from idle),
         rest as (select * from nonempty n where not exists (select 1 from shown s where s.id = n.id)),
         rest_dead_letters as (
             select coalesce(sum(d.messages), 0)::int8 as messages
             from nonempty d
             join consumers c on c.account_id = d.account_id and c.dead_letter_queue = d.name
                             and c.dead_letter_queue <> ''
             where not exists (select 1 from shown s where s.id = c.queue_id))
         select s.account_id, s.name as queue_name, s.messages as backlog_count, f.in_flight_count,
                f.delayed_count, s.oldest,
                case when d.id is not null then coalesce(db.messages, 0) end as dead_letter_backlog_count,
                1::int8 as queues
         from shown s
         left join consumers c on c.queue_id = s.id
         left join queues d on d.account_id = s.account_id and d.name = c.dead_letter_queue
         left join nonempty db on db.id = d.id
         cross join lateral (
             select (select count(*) from messages m where m.running and m.queue_id = s.id) as in_flight_count,
                    (select count(*) from messages m
                     where m.queue_id = s.id and not m.running and m.available_at > now()
                       and m.available_at < 'infinity') as delayed_count) f
         union all
         select null, null, coalesce(sum(r.messages), 0)::int8, coalesce(sum(f.in_flight_count), 0)::int8,
                coalesce(sum(f.delayed_count), 0)::int8, min(r.oldest), (select messages from rest_dead_letters),
                (select count(*) from queues) - (select count(*) from shown)
         from rest r
         cross join lateral (
             select (select count(*) from messages m where m.running and m.queue_id = r.id) as in_flight_count,
                    (select count(*) from messages m
                     where m.queue_id = r.id and not m.running and m.available_at > now()
                       and m.available_at < 'infinity') as delayed_count) f",
    )
    .bind(max_series)
    .fetch_all(pool)
    .await
}
