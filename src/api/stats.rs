//! skiplock's statistics endpoints (an extension of the Cloudflare API, for the dashboard):
//! message counts by state for every queue, and one queue's published/acked series.

use std::collections::HashMap;

use actix_web::{web, HttpResponse};
use chrono::{Duration, DurationRound, Utc};
use serde_json::{json, Value};

use super::envelope::ok;
use super::queues::queue_id;
use crate::activity::BUCKET_SECONDS;
use crate::auth::{Authed, QueuesRead};
use crate::error::{ApiError, ApiResult};
use crate::ids::QueueId;
use crate::state::AppState;
use crate::store::{
    self,
    stats::{QueueState, SourceCount},
};

type Data = web::Data<AppState>;

/// The chart's window: ten minutes of 10-second buckets.
const SERIES_MINUTES: i64 = 10;

fn summary(state: &QueueState, all: &HashMap<&str, &QueueState>, sources: Vec<Value>) -> Value {
    let dead_letter = all.get(state.dead_letter_queue.as_str());
    json!({
        "queue_id": state.queue_id,
        "queue_name": state.queue_name,
        "backlog_count": state.backlog_count,
        "backlog_bytes": state.backlog_bytes,
        "in_flight_count": state.in_flight_count,
        "delayed_count": state.delayed_count,
        "oldest_message_timestamp_ms": state.oldest.map(|t| t.timestamp_millis()).unwrap_or(0),
        "dead_letter_queue": state.dead_letter_queue,
        "dead_letter_backlog_count": dead_letter.map(|d| d.backlog_count),
        "dead_letter_sources": sources,
    })
}

/// A queue's dead-letter sources: the queues whose consumer names it as dead-letter queue (with 0
/// messages if none of theirs is here) and every queue its dead-lettered messages came from, with how
/// many; a source deleted since has `queue_name` null.
fn sources_of(states: &[QueueState], this: &QueueState, counts: &[SourceCount]) -> Vec<Value> {
    let mut sources: HashMap<QueueId, (Option<&str>, i64)> = states
        .iter()
        .filter(|s| s.dead_letter_queue == this.queue_name)
        .map(|s| (s.queue_id, (Some(s.queue_name.as_str()), 0)))
        .collect();
    for count in counts.iter().filter(|c| c.queue_id == this.queue_id) {
        let name = states.iter().find(|s| s.queue_id == count.source).map(|s| s.queue_name.as_str());
        sources.entry(count.source).or_insert((name, 0)).1 += count.messages;
    }
    let mut sources: Vec<_> = sources.into_iter().collect();
    sources.sort_by(|(a_id, (a, _)), (b_id, (b, _))| (a.is_none(), a, a_id.0).cmp(&(b.is_none(), b, b_id.0)));
    sources
        .into_iter()
        .map(|(id, (name, count))| json!({"queue_id": id, "queue_name": name, "message_count": count}))
        .collect()
}

/// `GET /accounts/{account_id}/stats/queues`: every queue's counts, its dead-letter queue's depth, and
/// the queues that dead-letter into it.
pub async fn all_queues(state: Data, auth: Authed<QueuesRead>) -> ApiResult<HttpResponse> {
    let states = store::stats::queue_states(&state.pool, Some(auth.account_id())).await?;
    let counts = store::stats::dead_letter_source_counts(&state.pool, auth.account_id()).await?;
    let by_name: HashMap<&str, &QueueState> = states.iter().map(|s| (s.queue_name.as_str(), s)).collect();
    let result: Vec<Value> = states.iter().map(|s| summary(s, &by_name, sources_of(&states, s, &counts))).collect();
    Ok(ok(result))
}

/// `GET /accounts/{account_id}/queues/{queue_id}/stats`: one queue's counts and its activity series.
pub async fn one_queue(
    state: Data,
    auth: Authed<QueuesRead>,
    path: web::Path<(String, String)>,
) -> ApiResult<HttpResponse> {
    let account = auth.account_id();
    let id = queue_id(&path.1)?;
    let states = store::stats::queue_states(&state.pool, Some(account)).await?;
    let this = states.iter().find(|s| s.queue_id == id).ok_or_else(ApiError::queue_not_found)?;
    let counts = store::stats::dead_letter_source_counts(&state.pool, account).await?;
    let by_name: HashMap<&str, &QueueState> = states.iter().map(|s| (s.queue_name.as_str(), s)).collect();
    let mut result = summary(this, &by_name, sources_of(&states, this, &counts));

    let bucket = Duration::seconds(BUCKET_SECONDS);
    let now = Utc::now().duration_trunc(bucket).expect("a bucket fits in a timestamp");
    let since = now - Duration::minutes(SERIES_MINUTES) + bucket;
    let found = store::stats::activity(&state.pool, id, since).await?;
    let counts: HashMap<i64, (i64, i64)> =
        found.iter().map(|b| (b.bucket.timestamp_millis(), (b.published, b.acked))).collect();
    let series: Vec<Value> = (0..SERIES_MINUTES * 60 / BUCKET_SECONDS)
        .map(|i| {
            let t = (since + bucket * i as i32).timestamp_millis();
            let (published, acked) = counts.get(&t).copied().unwrap_or_default();
            json!({"t": t, "published": published, "acked": acked})
        })
        .collect();
    result["bucket_seconds"] = json!(BUCKET_SECONDS);
    result["series"] = json!(series);
    Ok(ok(result))
}
