//! Usage: an account's own per period and queue (`GET /accounts/{id}/usage`, scope `queues_read`), and
//! every account's for operators (`GET /admin/v1/usage`), as JSON or CSV, streamed as PostgreSQL
//! produces it.

use actix_web::{web, HttpRequest, HttpResponse};
use bytes::Bytes;
use chrono::{DateTime, Datelike, NaiveDate, TimeZone, Utc};
use futures_util::stream;
use serde::Serialize;

use super::admin::extract::{Operated, Read};
use super::envelope::ok;
use super::extract::{Authed, QueuesRead};
use super::paging::{only_known, param, query_pairs};
use super::views::timestamp;
use crate::engine::Engine;
use crate::error::{ApiError, ApiResult};
use crate::ids::{AccountId, QueueId};
use crate::store::usage::{AccountUsage, Granularity, QueueUsage, Usage};

type Data = web::Data<Engine>;

/// The longest period a tenant's read may cover, in days, by granularity: hourly rows for a month, daily
/// or monthly ones for the thirteen months kept.
const MOST_DAYS_HOURLY: i64 = 31;
const MOST_DAYS: i64 = 400;

/// One period's figures, as both reads show them.
#[derive(Serialize)]
struct Figures {
    operations: i64,
    write_operations: i64,
    read_operations: i64,
    delete_operations: i64,
    messages_published: i64,
    messages_delivered: i64,
    messages_acked: i64,
    messages_retried: i64,
    messages_dead_lettered: i64,
    messages_expired: i64,
    bytes_published: i64,
    bytes_delivered: i64,
    storage_byte_hours: f64,
}

impl From<&Usage> for Figures {
    fn from(u: &Usage) -> Self {
        Self {
            operations: u.operations(),
            write_operations: u.write_ops,
            read_operations: u.read_ops,
            delete_operations: u.delete_ops,
            messages_published: u.published,
            messages_delivered: u.delivered,
            messages_acked: u.acked,
            messages_retried: u.retried,
            messages_dead_lettered: u.dead_lettered,
            messages_expired: u.expired,
            bytes_published: u.published_bytes,
            bytes_delivered: u.delivered_bytes,
            storage_byte_hours: u.storage_byte_seconds as f64 / 3600.0,
        }
    }
}

#[derive(Serialize)]
struct QueueUsageView {
    start: String,
    queue_id: QueueId,
    queue_name: String,
    #[serde(flatten)]
    figures: Figures,
}

#[derive(Serialize)]
struct AccountUsageView {
    account_id: AccountId,
    start: String,
    #[serde(flatten)]
    figures: Figures,
}

impl From<&AccountUsage> for AccountUsageView {
    fn from(row: &AccountUsage) -> Self {
        Self { account_id: row.account_id, start: timestamp(row.start), figures: Figures::from(&row.usage) }
    }
}

/// The period and granularity both reads take: `since` (default: the start of this month, UTC), `until`
/// (default: now), as RFC 3339 times or dates; `granularity` hour, day (default) or month.
struct Period {
    since: DateTime<Utc>,
    until: DateTime<Utc>,
    granularity: Granularity,
}

/// A time a read takes: an RFC 3339 time, or a date (`YYYY-MM-DD`, midnight UTC), from 1970 to 9999.
fn time(pairs: &[(String, String)], key: &str) -> ApiResult<Option<DateTime<Utc>>> {
    let Some(raw) = param(pairs, key) else { return Ok(None) };
    let is_date = raw.len() == 10
        && raw.bytes().enumerate().all(|(i, b)| if i == 4 || i == 7 { b == b'-' } else { b.is_ascii_digit() });
    let parsed = if is_date {
        NaiveDate::parse_from_str(raw, "%Y-%m-%d")
            .ok()
            .and_then(|d| d.and_hms_opt(0, 0, 0))
            .map(|t| Utc.from_utc_datetime(&t))
    } else {
        DateTime::parse_from_rfc3339(raw).ok().map(|t| t.with_timezone(&Utc))
    };
    match parsed {
        Some(t) if (1970..=9999).contains(&t.year()) => Ok(Some(t)),
        _ => Err(ApiError::invalid(format!(
            "{key} must be a date (2026-11-01) or an RFC 3339 time (2026-11-01T00:00:00Z) from 1970 to 9999, got {raw:?}"
        ))),
    }
}

fn period(pairs: &[(String, String)]) -> ApiResult<Period> {
    let now = Utc::now();
    let since = time(pairs, "since")?.unwrap_or(crate::queue::quota::month_start(now));
    let until = time(pairs, "until")?.unwrap_or(now);
    if since >= until {
        return Err(ApiError::invalid("since must be before until"));
    }
    let granularity = match param(pairs, "granularity") {
        None | Some("day") => Granularity::Day,
        Some("hour") => Granularity::Hour,
        Some("month") => Granularity::Month,
        Some(other) => return Err(ApiError::invalid(format!("granularity must be hour, day or month, got {other:?}"))),
    };
    Ok(Period { since, until, granularity })
}

/// `GET /accounts/{id}/usage`: the account's usage per period and queue, oldest first.
pub async fn account(state: Data, auth: Authed<QueuesRead>, req: HttpRequest) -> ApiResult<HttpResponse> {
    let pairs = query_pairs(&req)?;
    only_known(&pairs, &["since", "until", "granularity", "queue_id"])?;
    let p = period(&pairs)?;
    let most = if p.granularity == Granularity::Hour { MOST_DAYS_HOURLY } else { MOST_DAYS };
    if p.until - p.since > chrono::Duration::days(most) {
        return Err(ApiError::invalid(format!(
            "since and until may be at most {most} days apart at this granularity: ask for several periods"
        )));
    }
    let queue = param(&pairs, "queue_id")
        .map(|raw| raw.parse::<QueueId>().map_err(|e| ApiError::invalid(format!("queue_id: {e}"))))
        .transpose()?;
    let rows = state.account_usage(auth.account_id(), p.since, p.until, p.granularity, queue).await?;
    let views: Vec<QueueUsageView> = rows.iter().map(view).collect();
    Ok(ok(views))
}

fn view(row: &QueueUsage) -> QueueUsageView {
    QueueUsageView {
        start: timestamp(row.start),
        queue_id: row.queue_id,
        queue_name: row.queue_name.clone(),
        figures: Figures::from(&row.usage),
    }
}

/// The export's formats.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Format {
    Json,
    Csv,
}

const CSV_HEADER: &str = "account_id,start,operations,write_operations,read_operations,delete_operations,\
messages_published,messages_delivered,messages_acked,messages_retried,messages_dead_lettered,messages_expired,\
bytes_published,bytes_delivered,storage_byte_hours\n";

fn csv_line(row: &AccountUsage, out: &mut String) {
    use std::fmt::Write;
    let u = &row.usage;
    let _ = writeln!(
        out,
        "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
        row.account_id,
        timestamp(row.start),
        u.operations(),
        u.write_ops,
        u.read_ops,
        u.delete_ops,
        u.published,
        u.delivered,
        u.acked,
        u.retried,
        u.dead_lettered,
        u.expired,
        u.published_bytes,
        u.delivered_bytes,
        u.storage_byte_seconds as f64 / 3600.0
    );
}

/// Rows sent to the client per chunk of the answer.
const ROWS_PER_CHUNK: usize = 256;

/// `GET /admin/v1/usage`: every account's usage per period (one account's with `account_id`), in account
/// and period order; `format=csv` for CSV, else Cloudflare's envelope around the list. Streamed: nothing
/// is held but a chunk, whatever the number of accounts.
pub async fn export(state: Data, _: Operated<Read>, req: HttpRequest) -> ApiResult<HttpResponse> {
    let pairs = query_pairs(&req)?;
    only_known(&pairs, &["since", "until", "granularity", "account_id", "format"])?;
    let p = period(&pairs)?;
    let account = param(&pairs, "account_id")
        .map(|raw| raw.parse::<AccountId>().map_err(|e| ApiError::invalid(format!("account_id: {e}"))))
        .transpose()?;
    let format = match param(&pairs, "format") {
        None | Some("json") => Format::Json,
        Some("csv") => Format::Csv,
        Some(other) => return Err(ApiError::invalid(format!("format must be json or csv, got {other:?}"))),
    };
    let rows = state.export_usage(p.since, p.until, p.granularity, account);
    let head = match format {
        Format::Csv => CSV_HEADER,
        Format::Json => r#"{"success":true,"errors":[],"messages":[],"result":["#,
    };
    // (receiver, the head not yet sent, rows sent so far, finished)
    let chunks =
        stream::unfold((rows, Some(head), 0usize, false), move |(mut rows, head, mut sent, done)| async move {
            if done {
                return None;
            }
            let mut out = String::from(head.unwrap_or_default());
            let mut batch = Vec::with_capacity(ROWS_PER_CHUNK);
            let finished = rows.recv_many(&mut batch, ROWS_PER_CHUNK).await == 0;
            for row in &batch {
                // A failure after the answer began: the body ends without its end, so that no reader takes
                // a short export for a whole one.
                let row = match row {
                    Ok(row) => row,
                    Err(err) => {
                        tracing::error!(error = %err, "usage export ended early");
                        let failed = std::io::Error::other("the usage export failed");
                        return Some((Err(failed), (rows, None, sent, true)));
                    }
                };
                match format {
                    Format::Csv => csv_line(row, &mut out),
                    Format::Json => {
                        if sent > 0 {
                            out.push(',');
                        }
                        out.push_str(&serde_json::to_string(&AccountUsageView::from(row)).unwrap_or_default());
                    }
                }
                sent += 1;
            }
            if finished && format == Format::Json {
                out.push_str("]}");
            }
            Some((Ok(Bytes::from(out)), (rows, None, sent, finished)))
        });
    let content_type = match format {
        Format::Csv => "text/csv; charset=utf-8",
        Format::Json => "application/json",
    };
    Ok(HttpResponse::Ok().content_type(content_type).streaming(chunks))
}
