//! skiplock's statistics endpoints (an extension of the Cloudflare API, for the dashboard):
//! message counts by state for a page of the account's queues, and one queue's published/acked series.

use std::collections::HashMap;

use actix_web::{web, HttpRequest, HttpResponse};
use chrono::{Duration, DurationRound, Utc};
use serde_json::{json, Value};

use super::envelope::{ok, ok_list};
use super::paging::{query_pairs, Paging};
use crate::api::extract::{Authed, AuthedQueue, QueuesRead};
use crate::engine::activity::BUCKET_SECONDS;
use crate::engine::Engine;
use crate::error::{ApiError, ApiResult};
use crate::ids::QueueId;
use crate::store::owned::OwnedQueue;
use crate::store::{
    self,
    stats::{DeadLetterSource, QueueState},
};

type Data = web::Data<Engine>;

/// The chart's window: ten minutes of 10-second buckets.
const SERIES_MINUTES: i64 = 10;

fn summary(state: &QueueState, sources: Vec<Value>) -> Value {
    json!({
        "queue_id": state.queue_id,
        "queue_name": state.queue_name,
        "backlog_count": state.backlog_count,
        "backlog_bytes": state.backlog_bytes,
        "in_flight_count": state.in_flight_count,
        "delayed_count": state.delayed_count,
        "oldest_message_timestamp_ms": state.oldest.map(|t| t.timestamp_millis()).unwrap_or(0),
        "dead_letter_queue": state.dead_letter_queue,
        "dead_letter_backlog_count": state.dead_letter_backlog_count,
        "dead_letter_sources": sources,
        "ordering_key_count": state.ordering_key_count,
        "flow_keys_waiting": state.flow_keys_waiting,
        "flow_waiting_count": state.flow_waiting_count,
    })
}

/// A queue's dead-letter sources: the queues whose consumer names it as dead-letter queue (with 0
/// messages if none of theirs is here) and every queue its dead-lettered messages came from, with how
/// many; a source deleted since has `queue_name` null.
fn sources_of(this: &QueueState, found: &[DeadLetterSource]) -> Vec<Value> {
    let mut sources: HashMap<QueueId, (Option<&str>, i64)> = HashMap::new();
    for source in found.iter().filter(|s| s.queue_id == this.queue_id) {
        let entry = sources.entry(source.source).or_insert((None, 0));
        entry.0 = entry.0.or(source.source_name.as_deref());
        entry.1 += source.messages;
    }
    let mut sources: Vec<_> = sources.into_iter().collect();
    sources.sort_by(|(a_id, (a, _)), (b_id, (b, _))| (a.is_none(), a, a_id.0).cmp(&(b.is_none(), b, b_id.0)));
    sources
        .into_iter()
        .map(|(id, (name, count))| json!({"queue_id": id, "queue_name": name, "message_count": count}))
        .collect()
}

/// `GET /accounts/{account_id}/stats/queues?page=&per_page=`: a page of the account's queues by name,
/// each with its counts, its dead-letter queue's depth, and the queues that dead-letter into it.
pub async fn all_queues(state: Data, auth: Authed<QueuesRead>, req: HttpRequest) -> ApiResult<HttpResponse> {
    let paging = Paging::parse(&query_pairs(&req)?)?;
    let account = auth.account_id();
    let (states, total) = store::stats::queue_page(&state.pool, account, paging.page, paging.per_page).await?;
    let ids: Vec<QueueId> = states.iter().map(|s| s.queue_id).collect();
    let sources = store::stats::dead_letter_sources(&state.pool, account, &ids).await?;
    let result: Vec<Value> = states.iter().map(|s| summary(s, sources_of(s, &sources))).collect();
    let info = paging.info(result.len(), total);
    Ok(ok_list(result, info))
}

/// Each consumer's own counts, first consumer first: on a queue with several, each reads its own copies
/// (its lane), so each is behind by its own backlog.
async fn consumer_figures(state: &Data, queue: OwnedQueue) -> ApiResult<Vec<Value>> {
    let mut figures = Vec::new();
    for consumer in store::consumers::list(&state.pool, queue.account(), &[queue.id()]).await? {
        let Some(lane) = store::stats::queue_state(&state.pool, consumer.lane()).await? else { continue };
        figures.push(json!({
            "consumer_id": consumer.id,
            "type": consumer.kind().as_str(),
            "backlog_count": lane.backlog_count,
            "backlog_bytes": lane.backlog_bytes,
            "in_flight_count": lane.in_flight_count,
            "delayed_count": lane.delayed_count,
            "oldest_message_timestamp_ms": lane.oldest.map(|t| t.timestamp_millis()).unwrap_or(0),
            "dead_letter_queue": lane.dead_letter_queue,
            "dead_letter_backlog_count": lane.dead_letter_backlog_count,
        }));
    }
    Ok(figures)
}

/// `GET /accounts/{account_id}/queues/{queue_id}/stats`: one queue's counts, each consumer's, and its
/// activity series.
pub async fn one_queue(state: Data, at: AuthedQueue<QueuesRead>) -> ApiResult<HttpResponse> {
    let this = store::stats::queue_state(&state.pool, at.queue).await?.ok_or_else(ApiError::queue_not_found)?;
    let sources = store::stats::dead_letter_sources(&state.pool, at.queue.account(), &[at.queue.id()]).await?;
    let mut result = summary(&this, sources_of(&this, &sources));
    result["consumers"] = json!(consumer_figures(&state, at.queue).await?);

    let bucket = Duration::seconds(BUCKET_SECONDS);
    let now = Utc::now().duration_trunc(bucket).expect("a bucket fits in a timestamp");
    let since = now - Duration::minutes(SERIES_MINUTES) + bucket;
    let found = store::stats::activity(&state.pool, at.queue, since).await?;
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
