//! Lists and their paging: every list answers a page past its last with no items and a `result_info`
//! that echoes the page asked for, so the SDKs' auto-pagination ends; queues and consumers, which
//! Cloudflare's schema lists without paging parameters, answer whole when asked without them. The
//! official SDKs' own iteration over every list is in sdk.rs (Python) and clients.rs (TypeScript), on
//! the lists `seed` makes.

use reqwest::Method;
use serde_json::{json, Value};
use skiplock::auth::Scope;
use sqlx::PgPool;

use crate::helpers::{spawn_app, Resp, TestApp};

/// What `seed` made: more items than one page holds (20 by default) wherever the server lets a list
/// grow that long.
pub struct Seeded {
    pub queues: usize,
    pub tokens: usize,
    /// The queue with the one consumer and the redrive tasks.
    pub queue: String,
    pub redrive_tasks: usize,
}

impl Seeded {
    /// The expected counts as the SDK flows read them (`--expect`).
    pub fn expectations(&self) -> String {
        json!({"queues": self.queues, "tokens": self.tokens, "queue_id": self.queue, "redrive_tasks": self.redrive_tasks})
            .to_string()
    }
}

/// 45 queues, the first with a consumer and 25 redrive tasks (each finished at once: the queue holds no
/// dead-lettered messages), and 26 tokens (the app's and 25 more).
pub async fn seed(app: &TestApp) -> Seeded {
    let mut first = None;
    for i in 0..45 {
        let id = app.create_queue(&format!("listed-{i:02}")).await;
        first.get_or_insert(id);
    }
    let queue = first.unwrap();
    app.post(&format!("queues/{queue}/consumers"), json!({"type": "http_pull"})).await.expect_ok();
    for _ in 0..25 {
        let task = app.post(&format!("queues/{queue}/redrive"), json!({})).await;
        assert_eq!(task.status, 201, "{}", task.body);
    }
    for _ in 0..25 {
        app.token_with(&[Scope::QueuesRead]).await;
    }
    Seeded { queues: 45, tokens: 26, queue, redrive_tasks: 25 }
}

/// `GET` of a path under `/client/v4`.
async fn get_v4(app: &TestApp, path: &str) -> Resp {
    app.raw(Method::GET, &format!("{}/client/v4/{path}", app.address), Some(&app.token), None).await
}

/// Asserts a page of `count` items with this `result_info`; returns the items.
#[track_caller]
fn page(resp: &Resp, count: usize, info: Value) -> Vec<Value> {
    let items = resp.expect_ok().as_array().unwrap_or_else(|| panic!("a list: {}", resp.body)).clone();
    assert_eq!(items.len(), count, "{}", resp.body);
    assert_eq!(resp.body["result_info"], info, "{}", resp.body);
    items
}

fn info(page: i64, per_page: i64, count: i64, total_count: i64, total_pages: i64) -> Value {
    json!({"page": page, "per_page": per_page, "count": count, "total_count": total_count, "total_pages": total_pages})
}

#[sqlx::test]
async fn every_list_answers_an_empty_page_past_its_last_echoing_the_page_asked_for(pool: PgPool) {
    let app = spawn_app(pool).await;
    let seeded = seed(&app).await;
    let account = app.account.to_string();
    let q = &seeded.queue;

    // Lists whose items are many: the last page is partial, the one after it empty.
    for (path, total, per_page) in [
        ("queues".to_owned(), 45, 20),
        ("tokens".to_owned(), 26, 10),
        (format!("queues/{q}/redrive"), 25, 10),
        ("stats/queues".to_owned(), 45, 20),
    ] {
        let pages = (total + per_page - 1) / per_page;
        let mut seen = Vec::new();
        for number in 1..=pages {
            let resp = app.get(&format!("{path}?page={number}&per_page={per_page}")).await;
            let count = (total - (number - 1) * per_page).min(per_page);
            seen.extend(page(&resp, count as usize, info(number, per_page, count, total, pages)));
        }
        let past = app.get(&format!("{path}?page={}&per_page={per_page}", pages + 1)).await;
        page(&past, 0, info(pages + 1, per_page, 0, total, pages));
        let distinct: std::collections::HashSet<String> = seen.iter().map(Value::to_string).collect();
        assert_eq!(distinct.len(), total as usize, "{path}: every item once");
    }
    // Without paging parameters, tokens and redrive tasks answer their first page of 20.
    page(&app.get("tokens").await, 20, info(1, 20, 20, 26, 2));
    page(&app.get(&format!("queues/{q}/redrive")).await, 20, info(1, 20, 20, 25, 2));

    // A token sees one account: page 2 is empty, echoing page 2 and per_page.
    for path in ["accounts", "memberships"] {
        let first = page(&get_v4(&app, path).await, 1, info(1, 20, 1, 1, 1));
        let id = if path == "accounts" { &first[0]["id"] } else { &first[0]["account"]["id"] };
        assert_eq!(id, &json!(account));
        page(&get_v4(&app, &format!("{path}?per_page=1")).await, 1, info(1, 1, 1, 1, 1));
        page(&get_v4(&app, &format!("{path}?page=2&per_page=1")).await, 0, info(2, 1, 0, 1, 1));
        page(&get_v4(&app, &format!("{path}?page=2")).await, 0, info(2, 20, 0, 1, 1));
    }

    // A queue has at most one consumer and there are no event sources: these lists cannot outgrow a page,
    // but a page past the last still echoes the page asked for.
    page(&app.get(&format!("queues/{q}/consumers?page=2")).await, 0, info(2, 20, 0, 1, 1));
    page(&app.get(&format!("queues/{q}/consumers?page=1&per_page=5")).await, 1, info(1, 5, 1, 1, 1));
    let subscriptions = "event_subscriptions/subscriptions";
    page(&app.get(subscriptions).await, 0, info(1, 20, 0, 0, 0));
    page(&app.get(&format!("{subscriptions}?page=2&per_page=5")).await, 0, info(2, 5, 0, 0, 0));

    for path in ["tokens?page=0", "queues?per_page=1001", &format!("queues/{q}/redrive?per_page=x")] {
        let message = app.get(path).await.expect_error(400);
        assert!(message.contains("page"), "{path}: {message}");
    }
}

/// Cloudflare's schema gives the queue and consumer lists no paging parameters, and the SDKs ask once:
/// without `page` and `per_page` the answer is the whole list (the account's queue quota bounds it).
#[sqlx::test]
async fn queues_and_consumers_asked_without_paging_answer_every_item(pool: PgPool) {
    let app = spawn_app(pool).await;
    let seeded = seed(&app).await;
    let all = page(&app.get("queues").await, 45, info(1, 45, 45, 45, 1));
    let names: Vec<&str> = all.iter().map(|q| q["queue_name"].as_str().unwrap()).collect();
    let want: Vec<String> = (0..45).map(|i| format!("listed-{i:02}")).collect();
    assert_eq!(names, want, "every queue once, in creation order");
    // `name` filters the whole list; `page` or `per_page` alone pages it.
    page(&app.get("queues?name=listed-07&name=listed-44").await, 2, info(1, 2, 2, 2, 1));
    page(&app.get("queues?page=3").await, 5, info(3, 20, 5, 45, 3));
    page(&app.get("queues?per_page=50").await, 45, info(1, 50, 45, 45, 1));

    page(&app.get(&format!("queues/{}/consumers", seeded.queue)).await, 1, info(1, 1, 1, 1, 1));
    let other = app.get("queues?name=listed-01").await.expect_ok()[0]["queue_id"].as_str().unwrap().to_owned();
    page(&app.get(&format!("queues/{other}/consumers")).await, 0, info(1, 0, 0, 0, 0));
}
