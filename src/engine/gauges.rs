//! The per-queue gauges of `/metrics`, refreshed from one query.

use sqlx::PgPool;

use crate::metrics::Metrics;

/// Sets the per-queue gauges from one query. The `max_series` queues with the largest backlog get their
/// own series; the others are summed into `account="_other", queue="_other"` so that a large number of
/// tenants cannot explode the number of series.
pub async fn refresh(metrics: &Metrics, pool: &PgPool, max_series: usize) -> Result<(), sqlx::Error> {
    let rows = crate::store::gauges::queue_gauges(pool, max_series as i64).await?;
    let tasks = crate::store::redrive::count_by_status(pool).await?;
    for status in ["running", "completed", "cancelled", "failed"] {
        let n = tasks.iter().find(|(s, _)| s == status).map_or(0, |(_, n)| *n);
        metrics.redrive_tasks.with_label_values(&[status]).set(n);
    }
    let now = chrono::Utc::now();
    let gauges = [
        &metrics.queue_backlog,
        &metrics.queue_in_flight,
        &metrics.queue_delayed,
        &metrics.queue_oldest_age,
        &metrics.queue_dead_letter,
    ];
    for g in gauges {
        g.reset();
    }
    let mut series = 0;
    for row in &rows {
        // Ages do not add up: the others' oldest message is the oldest of them all.
        let age = row.oldest.map_or(0, |t| (now - t).num_seconds().max(0));
        let values = [row.backlog_count, row.in_flight_count, row.delayed_count, age];
        let (account, queue) = match (&row.account_id, &row.queue_name) {
            (Some(account), Some(name)) => {
                series += 1;
                (account.to_string(), name.clone())
            }
            _ if row.queues == 0 => continue,
            _ => ("_other".to_owned(), "_other".to_owned()),
        };
        for (g, value) in gauges.iter().zip(values) {
            g.with_label_values(&[&account, &queue]).set(value);
        }
        if let Some(dead_letter) = row.dead_letter_backlog_count {
            metrics.queue_dead_letter.with_label_values(&[&account, &queue]).set(dead_letter);
        }
    }
    metrics.queue_series.set(series);
    Ok(())
}
