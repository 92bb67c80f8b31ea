//! Every Cloudflare Queues operation skiplock serves, driven over HTTP, and every answer validated against
//! Cloudflare's published OpenAPI document by tests/cfschema/validate.py (openapi-core).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use reqwest::Method;
use serde_json::{json, Value};
use skiplock::auth::Scope;
use sqlx::PgPool;

use crate::helpers::{lease, spawn_app, Resp, TestApp};
use crate::receiver::{Answer, Receiver};

/// Fewer validated answers than this means the drive below lost operations.
const MIN_VALIDATED: usize = 80;

/// Cloudflare operations for which skiplock gives no 2xx answer to record, and why.
const NO_SUCCESS: &[(&str, &str)] = &[
    // skiplock serves these jobs under other paths, as an extension (API.md: Messages).
    ("queues-preview-messages", "skiplock previews with POST .../messages/peek"),
    ("queues-ack-preview-messages", "skiplock deletes peeked messages with POST .../messages/purge"),
];

/// skiplock's answers that Cloudflare's schema rejects. Each value is validated as if it were the `as` value
/// (a status, as that status of `as_operation`), so everything else in the answer is still checked.
fn allow_list() -> Value {
    json!([
        {
            "id": "webhook-consumer-type",
            // Consumers appear alone, in consumer lists, and inside Queue objects (alone or listed).
            "at": ["/result/type", "/result/*/type", "/result/consumers/*/type", "/result/*/consumers/*/type"],
            "value": "webhook",
            "as": "worker",
            "why": "skiplock's push consumer type; Cloudflare's consumer oneOf knows only worker and http_pull. \
                    A webhook consumer carries a worker consumer's settings (batch_size, max_retries, \
                    max_wait_time_ms, max_concurrency, retry_delay), so it is checked against that shape; its \
                    url and signing_secret are added fields, which the schema allows."
        },
        {
            "id": "webhook-max-concurrency-null",
            "at": [
                "/result/settings/max_concurrency",
                "/result/*/settings/max_concurrency",
                "/result/consumers/*/settings/max_concurrency",
                "/result/*/consumers/*/settings/max_concurrency"
            ],
            "value": null,
            "as": 1,
            "why": "null means the server's maximum, as Cloudflare's own description of max_concurrency says \
                    ('Set to null to automatically opt in to the platform's maximum'); the schema's entry \
                    (rebuilt from the SDKs' types) lacks `nullable: true`."
        },
        {
            "id": "subscription-source-types",
            "at": ["/result/source/type", "/result/*/source/type"],
            "value": "queues.queue",
            "as": "kv",
            "why": "skiplock's own event source (one queue's events); Cloudflare's source oneOf lists only its \
                    products' sources, each an object of its `type` alone. It is checked as the simplest of those; \
                    its queue_id and queue_name are added fields, which the schema allows."
        },
        {
            "id": "subscription-account-source-type",
            "at": ["/result/source/type", "/result/*/source/type"],
            "value": "queues",
            "as": "kv",
            "why": "skiplock's own event source (every queue of the account), checked as subscription-source-types is."
        },
        {
            "id": "subscription-delete-404",
            "operation": "subscriptions-delete",
            "status": 404,
            "as_operation": "subscriptions-get",
            "why": "Cloudflare's schema documents only a 200 for this delete, which an unknown subscription \
                    cannot get; skiplock answers the 404 failure envelope that the get of the same path \
                    documents, and the body is checked against that."
        }
    ])
}

/// Drives the app and records each exchange as the validator reads it.
struct Recorder<'a> {
    app: &'a TestApp,
    exchanges: Vec<Value>,
    /// Answers whose status (or, where the schema is silent, content) is not what API.md promises.
    off_contract: Vec<String>,
}

impl<'a> Recorder<'a> {
    fn new(app: &'a TestApp) -> Self {
        Self { app, exchanges: vec![], off_contract: vec![] }
    }

    /// Calls `template` (under `/accounts/{account_id}`, placeholders filled from `ids`) and records the
    /// exchange. The answer's status must be `expect`; a different one is noted, not a panic, so that one
    /// run reports every mismatch.
    async fn call(
        &mut self,
        method: Method,
        template: &str,
        ids: &[(&str, &str)],
        body: Option<Value>,
        expect: u16,
    ) -> Resp {
        let token = self.app.token.clone();
        self.call_as(method, template, ids, body, expect, Some(&token)).await
    }

    async fn call_as(
        &mut self,
        method: Method,
        template: &str,
        ids: &[(&str, &str)],
        body: Option<Value>,
        expect: u16,
        token: Option<&str>,
    ) -> Resp {
        let mut path = template.to_owned();
        for (name, value) in ids {
            path = path.replace(&format!("{{{name}}}"), value);
        }
        let (path, query) = path.split_once('?').map_or((path.clone(), None), |(p, q)| (p.to_owned(), Some(q)));
        let url = self.app.url(path.trim_start_matches('/')) + &query.map(|q| format!("?{q}")).unwrap_or_default();
        let sent = body.as_ref().map(|b| b.to_string());
        let resp = self.app.raw(method.clone(), &url, token, body.map(|b| b.to_string().into_bytes())).await;
        let template = format!("/accounts/{{account_id}}{}", template.split('?').next().unwrap());
        let shown = url.split_once("/client/v4").map_or(url.as_str(), |(_, p)| p).to_owned();
        if resp.status != expect {
            self.off_contract.push(format!(
                "{method} {shown}: expected {expect}, got {}\n    request: {}\n    answer: {}",
                resp.status,
                sent.as_deref().unwrap_or("(no body)"),
                resp.body
            ));
        }
        let content_type = resp.headers.get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default();
        self.exchanges.push(json!({
            "method": method.as_str(),
            "path": template,
            "url": shown,
            "status": resp.status,
            "content_type": content_type.split(';').next().unwrap_or_default().trim(),
            "body": resp.body,
        }));
        resp
    }
}

const QUEUES: &str = "/queues";
const QUEUE: &str = "/queues/{queue_id}";
const CONSUMERS: &str = "/queues/{queue_id}/consumers";
const CONSUMER: &str = "/queues/{queue_id}/consumers/{consumer_id}";
const SUBSCRIPTIONS: &str = "/event_subscriptions/subscriptions";

fn id(resp: &Resp, field: &str) -> String {
    resp.body["result"][field].as_str().unwrap_or_else(|| panic!("no {field} in {}", resp.body)).to_owned()
}

#[sqlx::test]
async fn every_cloudflare_answer_validates_against_cloudflares_openapi_document(pool: PgPool) {
    let app = spawn_app(pool).await;
    let receiver = Receiver::start(|_| Answer::status(200)).await;
    let mut r = Recorder::new(&app);
    let (get, post, put, patch, delete) = (Method::GET, Method::POST, Method::PUT, Method::PATCH, Method::DELETE);

    // Queues: create (plain, with settings, with the jurisdiction the newest SDK sends), and refusals.
    let created = r.call(post.clone(), QUEUES, &[], Some(json!({"queue_name": "cf-pull"})), 200).await;
    let pull_q = id(&created, "queue_id");
    let settings = json!({"delivery_delay": 0, "message_retention_period": 3600});
    let created =
        r.call(post.clone(), QUEUES, &[], Some(json!({"queue_name": "cf-hook", "settings": settings})), 200).await;
    let hook_q = id(&created, "queue_id");
    let eu = r.call(post.clone(), QUEUES, &[], Some(json!({"queue_name": "cf-eu", "jurisdiction": "eu"})), 200).await;
    let eu_q = eu.body["result"]["queue_id"].as_str().map(str::to_owned);
    r.call(post.clone(), QUEUES, &[], Some(json!({"queue_name": "cf-pull"})), 409).await;
    r.call(post.clone(), QUEUES, &[], Some(json!({"queue_name": "Not A Name"})), 400).await;
    r.call(post.clone(), QUEUES, &[], Some(json!({})), 400).await;
    r.call_as(get.clone(), QUEUES, &[], None, 401, None).await;
    r.call_as(get.clone(), QUEUES, &[], None, 401, Some("not-a-token")).await;
    let reader = app.token_with(&[Scope::QueuesRead]).await;
    r.call_as(post.clone(), QUEUES, &[], Some(json!({"queue_name": "cf-read"})), 403, Some(&reader)).await;

    // Consumers of both kinds, with a dead-letter queue, the webhook one with skiplock's added settings.
    let pull_ids = [("queue_id", pull_q.as_str())];
    let body = json!({"type": "http_pull", "dead_letter_queue": "cf-dlq",
        "settings": {"batch_size": 10, "max_retries": 3, "retry_delay": 0, "visibility_timeout_ms": 30000}});
    let pull_c = id(&r.call(post.clone(), CONSUMERS, &pull_ids, Some(body), 200).await, "consumer_id");
    let hook_ids = [("queue_id", hook_q.as_str())];
    let body = json!({"type": "webhook", "url": receiver.url,
        "settings": {"batch_size": 5, "max_retries": 2, "max_wait_time_ms": 1000, "max_concurrency": 4,
                     "retry_delay": 1, "retry_backoff": "exponential", "retry_delay_max": 60}});
    let hook_c = id(&r.call(post.clone(), CONSUMERS, &hook_ids, Some(body), 200).await, "consumer_id");
    let worker = json!({"type": "worker", "script_name": "my-worker"});
    let other = id(&r.call(post.clone(), QUEUES, &[], Some(json!({"queue_name": "cf-other"})), 200).await, "queue_id");
    let other_ids = [("queue_id", other.as_str())];
    r.call(post.clone(), CONSUMERS, &other_ids, Some(worker), 400).await;
    r.call(post.clone(), CONSUMERS, &other_ids, Some(json!({"type": "webhook"})), 400).await;
    // A webhook consumer left at the server's maximum concurrency answers `max_concurrency: null`.
    let body = json!({"type": "webhook", "url": receiver.url});
    let other_c = id(&r.call(post.clone(), CONSUMERS, &other_ids, Some(body), 200).await, "consumer_id");

    for (ids, consumer) in [(&pull_ids, &pull_c), (&hook_ids, &hook_c), (&other_ids, &other_c)] {
        let with = [ids[0], ("consumer_id", consumer.as_str())];
        r.call(get.clone(), CONSUMERS, ids, None, 200).await;
        r.call(get.clone(), &format!("{CONSUMERS}?page=2"), ids, None, 200).await;
        r.call(get.clone(), CONSUMER, &with, None, 200).await;
    }
    let body = json!({"type": "http_pull", "dead_letter_queue": "",
        "settings": {"batch_size": 20, "visibility_timeout_ms": 60000}});
    r.call(put.clone(), CONSUMER, &[pull_ids[0], ("consumer_id", &pull_c)], Some(body), 200).await;
    let body = json!({"type": "webhook", "url": receiver.url, "settings": {"batch_size": 50, "max_concurrency": null}});
    r.call(put.clone(), CONSUMER, &[hook_ids[0], ("consumer_id", &hook_c)], Some(body), 200).await;
    let unknown = "0123456789abcdef0123456789abcdef";
    r.call(get.clone(), CONSUMER, &[pull_ids[0], ("consumer_id", unknown)], None, 404).await;

    // Queues seen with their consumers: list (whole and paged), get, PUT, PATCH (pause and resume).
    r.call(get.clone(), QUEUES, &[], None, 200).await;
    r.call(get.clone(), "/queues?page=2&per_page=2", &[], None, 200).await;
    r.call(get.clone(), "/queues?page=9&per_page=2", &[], None, 200).await; // past the last: empty
    r.call(get.clone(), "/queues?name=cf-hook", &[], None, 200).await;
    r.call(get.clone(), "/queues?per_page=0", &[], None, 400).await;
    for q in [&pull_q, &hook_q] {
        r.call(get.clone(), QUEUE, &[("queue_id", q)], None, 200).await;
    }
    r.call(get.clone(), QUEUE, &[("queue_id", unknown)], None, 404).await;
    // The schema has no `jurisdiction`, so the contract (API.md: kept in every Queue object) is checked here.
    let mut eu_answers = vec![("create", eu.body)];
    if let Some(q) = &eu_q {
        eu_answers.push(("get", r.call(get.clone(), QUEUE, &[("queue_id", q)], None, 200).await.body));
    }
    let listed = r.call(get.clone(), "/queues?name=cf-eu", &[], None, 200).await.body;
    eu_answers.push(("list", json!({"result": listed["result"][0]})));
    for (what, answer) in eu_answers {
        if answer["result"]["jurisdiction"] != "eu" {
            r.off_contract
                .push(format!("{what} of a queue created with jurisdiction eu has no `jurisdiction: eu`: {answer}"));
        }
    }
    if let Some(q) = &eu_q {
        // A dead-letter queue must be in its source queue's jurisdiction: cf-dlq has none.
        let body = json!({"type": "http_pull", "dead_letter_queue": "cf-dlq"});
        r.call(post.clone(), CONSUMERS, &[("queue_id", q)], Some(body), 400).await;
    }
    r.call(get.clone(), QUEUE, &[("queue_id", "not-an-id")], None, 400).await;
    let body = json!({"queue_name": "cf-hook", "settings": {"delivery_delay": 2, "message_retention_period": 7200}});
    r.call(put.clone(), QUEUE, &hook_ids, Some(body), 200).await;
    r.call(put.clone(), QUEUE, &hook_ids, Some(json!({"settings": {"delivery_delay": -1}})), 400).await;
    // The SDKs send a whole Queue object back, read-only fields included.
    let whole = r.call(get.clone(), QUEUE, &pull_ids, None, 200).await.body["result"].clone();
    r.call(put.clone(), QUEUE, &pull_ids, Some(whole), 200).await;
    r.call(patch.clone(), QUEUE, &pull_ids, Some(json!({"settings": {"delivery_paused": true}})), 200).await;
    r.call(post.clone(), "/queues/{queue_id}/messages/pull", &pull_ids, Some(json!({})), 409).await;
    r.call(patch.clone(), QUEUE, &pull_ids, Some(json!({"settings": {"delivery_paused": false}})), 200).await;

    // Messages: push one (text, json, bytes, delayed), push a batch, and refusals.
    let messages = "/queues/{queue_id}/messages";
    for message in [
        json!({"body": "hello", "content_type": "text", "ordering_key": "customer-9"}),
        json!({"body": {"order": 1, "items": [1, 2]}, "content_type": "json"}),
        json!({"body": "AQID", "content_type": "bytes"}),
        json!({"body": "later", "content_type": "text", "delay_seconds": 600}),
    ] {
        r.call(post.clone(), messages, &pull_ids, Some(message), 200).await;
    }
    r.call(post.clone(), messages, &pull_ids, Some(json!({"body": "x", "content_type": "v8"})), 400).await;
    r.call(post.clone(), messages, &pull_ids, Some(json!({"body": "x", "delay_seconds": 999999})), 400).await;
    r.call(post.clone(), messages, &pull_ids, Some(json!({"body": "x", "delay_secnds": 5})), 400).await;
    r.call(post.clone(), messages, &[("queue_id", unknown)], Some(json!({"body": "x"})), 404).await;
    let batch = json!({"messages": [
        {"body": "one", "content_type": "text"},
        {"body": [1, 2, 3], "content_type": "json", "delay_seconds": 0},
        {"body": "two", "content_type": "text", "ordering_key": "customer-7"}
    ]});
    r.call(post.clone(), "/queues/{queue_id}/messages/batch", &pull_ids, Some(batch), 200).await;
    r.call(
        post.clone(),
        "/queues/{queue_id}/messages/batch",
        &hook_ids,
        Some(json!({"messages": [{"body": "h"}]})),
        200,
    )
    .await;
    let misspelt = json!({"messages": [{"body": "h"}, {"body": "i", "delay_secnds": 5}]});
    r.call(post.clone(), "/queues/{queue_id}/messages/batch", &pull_ids, Some(misspelt), 400).await;
    let too_many: Vec<Value> = (0..101).map(|i| json!({"body": i})).collect();
    r.call(post.clone(), "/queues/{queue_id}/messages/batch", &pull_ids, Some(json!({"messages": too_many})), 413)
        .await;
    r.call(get.clone(), "/queues/{queue_id}/metrics", &pull_ids, None, 200).await;
    r.call(get.clone(), "/queues/{queue_id}/metrics", &other_ids, None, 200).await;

    // Pull, ack and retry; an unknown lease gets a warning. Six messages are ready (one is delayed), two
    // of them with ordering keys of their own.
    let pull = "/queues/{queue_id}/messages/pull";
    let got = r
        .call(post.clone(), pull, &pull_ids, Some(json!({"batch_size": 4, "visibility_timeout_ms": 30000})), 200)
        .await;
    let leased: Vec<Value> = got.body["result"]["messages"].as_array().cloned().unwrap_or_default();
    assert_eq!(leased.len(), 4, "the pull leases 4 of the 6 ready messages: {}", got.body);
    let acks = json!({
        "acks": [{"lease_id": lease(&leased[0])}, {"lease_id": lease(&leased[1])}, {"lease_id": "forged"}],
        "retries": [{"lease_id": lease(&leased[2]), "delay_seconds": 0}, {"lease_id": lease(&leased[3])}]
    });
    r.call(post.clone(), "/queues/{queue_id}/messages/ack", &pull_ids, Some(acks), 200).await;
    let bad = json!({"retries": [{"lease_id": lease(&leased[2]), "delay_seconds": -5}]});
    r.call(post.clone(), "/queues/{queue_id}/messages/ack", &pull_ids, Some(bad), 400).await;
    r.call(post.clone(), pull, &pull_ids, Some(json!({"batch_size": 100, "visibility_timeout": 1000})), 200).await;
    r.call(post.clone(), pull, &pull_ids, Some(json!({"batch_size": 0})), 400).await;
    r.call(post.clone(), pull, &other_ids, Some(json!({})), 409).await;
    let empty = id(&r.call(post.clone(), QUEUES, &[], Some(json!({"queue_name": "cf-empty"})), 200).await, "queue_id");
    let empty_ids = [("queue_id", empty.as_str())];
    r.call(post.clone(), CONSUMERS, &empty_ids, Some(json!({"type": "http_pull"})), 200).await;
    r.call(post.clone(), pull, &empty_ids, Some(json!({})), 200).await;
    r.call(get.clone(), "/queues/{queue_id}/metrics", &empty_ids, None, 200).await;

    // Purge: the status of a never-purged queue, a purge, its status after, and a refusal.
    let purge = "/queues/{queue_id}/purge";
    r.call(get.clone(), purge, &hook_ids, None, 200).await;
    r.call(post.clone(), purge, &pull_ids, Some(json!({"delete_messages_permanently": true})), 200).await;
    r.call(get.clone(), purge, &pull_ids, None, 200).await;
    r.call(post.clone(), purge, &pull_ids, Some(json!({"delete_messages_permanently": false})), 400).await;
    r.call(get.clone(), "/queues/{queue_id}/metrics", &pull_ids, None, 200).await;

    // Event subscriptions: skiplock's own sources (one queue, every queue); Cloudflare's product sources are
    // refused by name.
    let subscription = json!({"name": "uploads", "enabled": true, "source": {"type": "r2"},
        "destination": {"type": "queues.queue", "queue_id": pull_q}, "events": ["object.create"]});
    r.call(post.clone(), SUBSCRIPTIONS, &[], Some(subscription), 400).await;
    let one_queue = json!({"name": "hook-alerts", "source": {"type": "queues.queue", "queue_id": hook_q},
        "destination": {"type": "queues.queue", "queue_id": pull_q}, "events": ["consumer.failing"]});
    let made = r.call(post.clone(), SUBSCRIPTIONS, &[], Some(one_queue), 200).await;
    let every = json!({"name": "all", "source": {"type": "queues"},
        "destination": {"type": "queues.queue", "queue_id": pull_q}, "events": ["redrive.finished"]});
    r.call(post.clone(), SUBSCRIPTIONS, &[], Some(every), 200).await;
    r.call(get.clone(), SUBSCRIPTIONS, &[], None, 200).await;
    r.call(get.clone(), &format!("{SUBSCRIPTIONS}?page=1&per_page=20&order=created_at&direction=desc"), &[], None, 200)
        .await;
    r.call(get.clone(), &format!("{SUBSCRIPTIONS}?page=2&per_page=20"), &[], None, 200).await;
    let subscription = format!("{SUBSCRIPTIONS}/{{subscription_id}}");
    let made_id = id(&made, "id");
    let this = [("subscription_id", made_id.as_str())];
    r.call(get.clone(), &subscription, &this, None, 200).await;
    r.call(patch.clone(), &subscription, &this, Some(json!({"enabled": false, "name": "renamed"})), 200).await;
    r.call(delete.clone(), &subscription, &this, None, 200).await;
    let no_such = [("subscription_id", unknown)];
    r.call(get.clone(), &subscription, &no_such, None, 404).await;
    r.call(patch.clone(), &subscription, &no_such, Some(json!({"enabled": false})), 404).await;
    r.call(delete.clone(), &subscription, &no_such, None, 404).await;

    // Deletes: consumers, then queues, then the 404s that follow.
    for (ids, consumer) in [(&pull_ids, &pull_c), (&hook_ids, &hook_c)] {
        let with = [ids[0], ("consumer_id", consumer.as_str())];
        r.call(delete.clone(), CONSUMER, &with, None, 200).await;
        r.call(delete.clone(), CONSUMER, &with, None, 404).await;
    }
    r.call(delete.clone(), QUEUE, &other_ids, None, 200).await;
    r.call(delete.clone(), QUEUE, &other_ids, None, 404).await;
    r.call(get.clone(), QUEUE, &other_ids, None, 404).await;
    r.call(get.clone(), QUEUES, &[], None, 200).await;

    let report = validate(&r.exchanges).await;
    let (validated, failures) = (report.validated, report.failures);
    let mut problems = vec![];
    if !r.off_contract.is_empty() {
        problems.push(format!("answers other than API.md promises:\n{}", r.off_contract.join("\n")));
    }
    if failures > 0 {
        problems.push(format!("answers that Cloudflare's schema rejects:\n{}", report.output));
    }
    if validated < MIN_VALIDATED {
        problems.push(format!("only {validated} answers validated, fewer than {MIN_VALIDATED}"));
    }
    for (entry, uses) in &report.allowances_used {
        if *uses == 0 {
            problems.push(format!("allow-list entry {entry} was never needed: remove it"));
        }
    }
    let missing = not_covered(&report.operations);
    if !missing.is_empty() {
        problems.push(format!("operations of Cloudflare's schema with no 2xx answer recorded: {missing:?}"));
    }
    assert!(problems.is_empty(), "{}\n\nvalidator output:\n{}", problems.join("\n\n"), report.output);
    println!("{}", report.output);
}

struct Report {
    validated: usize,
    failures: usize,
    operations: BTreeMap<String, Vec<u16>>,
    allowances_used: BTreeMap<String, u64>,
    output: String,
}

/// Runs the validator on the recorded exchanges with the allow-list above.
async fn validate(exchanges: &[Value]) -> Report {
    let root = env!("CARGO_MANIFEST_DIR");
    let python = Path::new(root).join(".venv/bin/python");
    assert!(python.exists(), "{} is missing: `make test` creates it (make venv)", python.display());
    let dir = std::env::temp_dir().join(format!("skiplock-cfschema-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let (recorded, allowed, report) = (dir.join("exchanges.json"), dir.join("allow.json"), dir.join("report.json"));
    std::fs::write(&recorded, serde_json::to_vec_pretty(exchanges).unwrap()).unwrap();
    std::fs::write(&allowed, allow_list().to_string()).unwrap();
    let output = tokio::process::Command::new(python)
        .arg(Path::new(root).join("tests/cfschema/validate.py"))
        .arg(&recorded)
        .arg("--allow")
        .arg(&allowed)
        .arg("--report")
        .arg(&report)
        .output()
        .await
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    let summary: Value = match std::fs::read(&report) {
        Ok(bytes) => serde_json::from_slice(&bytes).unwrap(),
        Err(_) => panic!("the validator wrote no report:\n{text}"),
    };
    std::fs::remove_dir_all(&dir).ok();
    Report {
        validated: summary["validated"].as_u64().unwrap() as usize,
        failures: summary["failed"].as_u64().unwrap() as usize,
        operations: serde_json::from_value(summary["operations"].clone()).unwrap(),
        allowances_used: serde_json::from_value(summary["allowances_used"].clone()).unwrap(),
        output: text,
    }
}

/// The schema's operations that got no 2xx answer and are not listed in `NO_SUCCESS`.
fn not_covered(seen: &BTreeMap<String, Vec<u16>>) -> BTreeSet<String> {
    let schema: Value = serde_json::from_slice(
        &std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cfschema/cloudflare-queues-openapi.json"))
            .unwrap(),
    )
    .unwrap();
    let all = schema["paths"].as_object().unwrap().values().flat_map(|methods| {
        methods.as_object().unwrap().values().filter_map(|op| op["operationId"].as_str().map(str::to_owned))
    });
    let answered = |op: &str| seen.get(op).is_some_and(|s| s.iter().any(|s| (200..300).contains(s)));
    all.filter(|op| !answered(op) && !NO_SUCCESS.iter().any(|(name, _)| name == op)).collect()
}
