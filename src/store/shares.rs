//! How fast each node is asked to go for the accounts' limited rates, so that each node takes its share of
//! an account's rate (`engine::shares`): every second a node serving limited accounts writes its own
//! figures and reads the others'.

use sqlx::PgPool;
use uuid::Uuid;

use crate::ids::AccountId;

/// One node's figure for one account's rate of one kind.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Demand {
    pub account: AccountId,
    pub kind: i16,
    pub per_second: f32,
}

/// Writes `node`'s figures and answers, for the same accounts and kinds, what the other nodes asked for
/// per second in all, as reported within the last `fresh_seconds`.
pub async fn exchange(
    pool: &PgPool,
    node: Uuid,
    mine: &[Demand],
    fresh_seconds: f64,
) -> Result<Vec<Demand>, sqlx::Error> {
    let accounts: Vec<Uuid> = mine.iter().map(|d| d.account.0).collect();
    let kinds: Vec<i16> = mine.iter().map(|d| d.kind).collect();
    let rates: Vec<f32> = mine.iter().map(|d| d.per_second).collect();
    let rows = sqlx::query!(
        r#"with mine as (
               insert into rate_demands (account_id, kind, node, per_second, reported_at)
               select account_id, kind, $4, per_second, now()
               from unnest($1::uuid[], $2::int2[], $3::real[]) as m (account_id, kind, per_second)
               on conflict (account_id, kind, node)
               do update set per_second = excluded.per_second, reported_at = excluded.reported_at
           )
           select d.account_id as "account_id: AccountId", d.kind, sum(d.per_second)::real as "per_second!"
           from rate_demands d
           join unnest($1::uuid[], $2::int2[]) as m (account_id, kind)
             on d.account_id = m.account_id and d.kind = m.kind
           where d.node <> $4 and d.reported_at > now() - make_interval(secs => $5)
           group by d.account_id, d.kind"#,
        &accounts,
        &kinds,
        &rates,
        node,
        fresh_seconds,
    )
    .fetch_all(pool)
    .await?;
    Ok(rows.into_iter().map(|r| Demand { account: r.account_id, kind: r.kind, per_second: r.per_second }).collect())
}

/// Forgets figures older than `seconds`: those of nodes that stopped, or of accounts that went quiet.
pub async fn forget_older_than(pool: &PgPool, seconds: f64) -> Result<u64, sqlx::Error> {
    let gone = sqlx::query!("delete from rate_demands where reported_at < now() - make_interval(secs => $1)", seconds)
        .execute(pool)
        .await?;
    Ok(gone.rows_affected())
}
