//! W8f's two layouts of the same four consumers (two pulling, two webhooks): one queue holding all four,
//! whose publishes store each body once and a narrow copy per further consumer, and four queues of one
//! consumer each, whose publishes store the body four times. Both are fed the same messages, paused,
//! and drained from the moment delivery resumes; what counts is deliveries, one per consumer per message.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actix_web::{web, HttpResponse};
use anyhow::{bail, Context};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::api_load::Api;

/// Pulling connections per pull consumer: two consumers of two, as W2's four.
const PULLERS_PER_CONSUMER: usize = 2;

/// Messages each webhook consumer received, by consumer id; answering 200 acks the batch.
#[derive(Default)]
pub struct Arrivals {
    counts: Mutex<HashMap<String, u64>>,
}

#[derive(Deserialize)]
struct Delivery<'a> {
    consumer_id: &'a str,
    messages: Vec<serde::de::IgnoredAny>,
}

async fn receive(body: web::Bytes, arrivals: web::Data<Arrivals>) -> HttpResponse {
    let Ok(delivery) = serde_json::from_slice::<Delivery<'_>>(&body) else {
        return HttpResponse::BadRequest().finish();
    };
    *arrivals.counts.lock().expect("arrivals").entry(delivery.consumer_id.to_owned()).or_default() +=
        delivery.messages.len() as u64;
    HttpResponse::Ok().finish()
}

/// The local endpoint the webhook consumers deliver to.
pub struct Receiver {
    pub url: String,
    arrivals: web::Data<Arrivals>,
    handle: actix_web::dev::ServerHandle,
}

impl Receiver {
    pub fn start() -> anyhow::Result<Receiver> {
        let arrivals = web::Data::new(Arrivals::default());
        let (port, handle) = crate::setup::start_receiver(arrivals.clone(), receive)?;
        Ok(Receiver { url: format!("http://127.0.0.1:{port}/hook"), arrivals, handle })
    }

    fn received(&self, consumer: &str) -> u64 {
        self.arrivals.counts.lock().expect("arrivals").get(consumer).copied().unwrap_or(0)
    }

    fn forget(&self) {
        self.arrivals.counts.lock().expect("arrivals").clear();
    }

    pub async fn stop(self) {
        self.handle.stop(false).await;
    }
}

/// Where each of the four consumers reads: the queues to feed, the pull consumers (queue, and the
/// `consumer_id` a pull names when its queue has several) and the webhook consumers' ids.
pub struct Layout {
    pub fed: Vec<String>,
    pulls: Vec<(String, Option<String>)>,
    webhooks: Vec<String>,
}

/// The consumers' settings, the same in both layouts.
fn pull_consumer() -> Value {
    json!({"type": "http_pull", "settings": {"max_retries": 100}})
}

fn webhook_consumer(url: &str) -> Value {
    json!({"type": "webhook", "url": url, "settings": {"batch_size": 100, "max_retries": 100}})
}

impl Layout {
    /// One queue named `name` with all four consumers.
    pub async fn one_queue(api: &Api, name: &str, receiver: &Receiver) -> anyhow::Result<Layout> {
        let queue = create_queue(api, name).await?;
        let mut layout = Layout { fed: vec![queue.clone()], pulls: vec![], webhooks: vec![] };
        for _ in 0..2 {
            let id = add_consumer(api, &queue, pull_consumer()).await?;
            layout.pulls.push((queue.clone(), Some(id)));
        }
        for _ in 0..2 {
            layout.webhooks.push(add_consumer(api, &queue, webhook_consumer(&receiver.url)).await?);
        }
        Ok(layout)
    }

    /// Four queues named `{name}-0` to `{name}-3`, one consumer each.
    pub async fn four_queues(api: &Api, name: &str, receiver: &Receiver) -> anyhow::Result<Layout> {
        let mut layout = Layout { fed: vec![], pulls: vec![], webhooks: vec![] };
        for i in 0..4 {
            let queue = create_queue(api, &format!("{name}-{i}")).await?;
            if i < 2 {
                add_consumer(api, &queue, pull_consumer()).await?;
                layout.pulls.push((queue.clone(), None));
            } else {
                layout.webhooks.push(add_consumer(api, &queue, webhook_consumer(&receiver.url)).await?);
            }
            layout.fed.push(queue);
        }
        Ok(layout)
    }

    /// Pauses or resumes delivery from every queue of the layout.
    pub async fn set_paused(&self, api: &Api, paused: bool) -> anyhow::Result<()> {
        for queue in &self.fed {
            let url = format!("http://{}/client/v4/accounts/{}/queues/{queue}", api.host, api.account);
            let settings = json!({"settings": {"delivery_paused": paused}});
            let resp = reqwest::Client::new().patch(url).bearer_auth(&api.token).json(&settings).send().await?;
            if !resp.status().is_success() {
                bail!("pausing queue {queue}: {}", resp.status());
            }
        }
        Ok(())
    }

    /// Resumes delivery and drains: the pull consumers until their queues answer empty, the webhook
    /// consumers until each has received `messages`. Returns the deliveries and the seconds they took.
    pub async fn drain(&self, api: &Api, receiver: &Receiver, messages: u64) -> anyhow::Result<(u64, f64)> {
        receiver.forget();
        let started = Instant::now();
        self.set_paused(api, false).await?;
        let pulled = Arc::new(AtomicU64::new(0));
        let mut pullers = tokio::task::JoinSet::new();
        for (queue, consumer) in &self.pulls {
            for _ in 0..PULLERS_PER_CONSUMER {
                let (api, queue, consumer, pulled) = (api.clone(), queue.clone(), consumer.clone(), pulled.clone());
                pullers.spawn(async move {
                    let drained = api.drain_as(&queue, consumer.as_deref(), 1, 3600.0).await?;
                    pulled.fetch_add(drained.messages, Ordering::Relaxed);
                    anyhow::Ok(())
                });
            }
        }
        let deadline = started + Duration::from_secs(3600);
        while self.webhooks.iter().any(|c| receiver.received(c) < messages) {
            if Instant::now() > deadline {
                bail!("the webhook consumers did not receive {messages} messages each within an hour");
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        while let Some(task) = pullers.join_next().await {
            task??;
        }
        let seconds = started.elapsed().as_secs_f64();
        let pushed: u64 = self.webhooks.iter().map(|c| receiver.received(c)).sum();
        Ok((pulled.load(Ordering::Relaxed) + pushed, seconds))
    }
}

async fn create_queue(api: &Api, name: &str) -> anyhow::Result<String> {
    let made = post(api, "queues", json!({"queue_name": name})).await?;
    Ok(made["queue_id"].as_str().context("a queue id")?.to_owned())
}

async fn add_consumer(api: &Api, queue: &str, consumer: Value) -> anyhow::Result<String> {
    let made = post(api, &format!("queues/{queue}/consumers"), consumer).await?;
    Ok(made["consumer_id"].as_str().context("a consumer id")?.to_owned())
}

async fn post(api: &Api, path: &str, body: Value) -> anyhow::Result<Value> {
    let url = format!("http://{}/client/v4/accounts/{}/{path}", api.host, api.account);
    let resp = reqwest::Client::new().post(url).bearer_auth(&api.token).json(&body).send().await?;
    let status = resp.status();
    let answer: Value = resp.json().await?;
    if !status.is_success() {
        bail!("POST {path}: {status} {answer}");
    }
    Ok(answer["result"].clone())
}
