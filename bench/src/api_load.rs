//! skiplock's side of the suite: publishers and consumers on its HTTP API, one lean connection each.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde::Deserialize;
use serde_json::json;

use crate::http::{Connection, Request};

/// A queue of skiplock's, reached over its API.
#[derive(Clone)]
pub struct Api {
    pub host: String,
    pub account: String,
    pub token: String,
}

/// A pull of up to 100 messages leased for a minute.
const PULL: &str = r#"{"batch_size":100,"visibility_timeout_ms":60000}"#;

/// `PULL` by `consumer`, when the queue has several.
fn pull_body(consumer: Option<&str>) -> String {
    match consumer {
        Some(id) => format!(r#"{{"batch_size":100,"visibility_timeout_ms":60000,"consumer_id":"{id}"}}"#),
        None => PULL.to_owned(),
    }
}

/// What a drain did: messages acked, in how long, and how long each pull took.
pub struct Drained {
    pub messages: u64,
    pub seconds: f64,
    pub pulls: Vec<Duration>,
}

#[derive(Deserialize)]
struct Pulled<'a> {
    #[serde(borrow)]
    result: PullResult<'a>,
}

#[derive(Deserialize)]
struct PullResult<'a> {
    #[serde(borrow)]
    messages: Vec<Leased<'a>>,
}

/// Of each pulled message, only the lease is kept; the rest of the answer (the body) is still read and
/// checked by the JSON parser, as a consumer's would be.
#[derive(Deserialize)]
struct Leased<'a> {
    lease_id: &'a str,
}

impl Api {
    pub fn request(&self, queue: &str, path: &str, body: &[u8]) -> Request {
        let path = format!("/client/v4/accounts/{}/queues/{queue}/messages{path}", self.account);
        Request::post(&self.host, &path, &self.token, body)
    }

    /// A publish of `batch` messages of `body` (text): to `/messages` for one, `/messages/batch` for more.
    fn publish_request(&self, queue: &str, batch: usize, body: &str) -> Request {
        let message = json!({"body": body, "content_type": "text"});
        if batch == 1 {
            self.request(queue, "", message.to_string().as_bytes())
        } else {
            let messages = vec![message; batch];
            self.request(queue, "/batch", json!({ "messages": messages }).to_string().as_bytes())
        }
    }

    /// `clients` connections publishing `batch` messages per request for `seconds`, as fast as they are
    /// answered or, with `rate`, at about that many messages a second in all; returns the messages
    /// stored (2xx answers) and the seconds taken.
    pub async fn publish(
        &self,
        queue: &str,
        (clients, batch): (usize, usize),
        body: &str,
        seconds: f64,
        rate: Option<f64>,
    ) -> anyhow::Result<(u64, f64)> {
        let every = rate.map(|rate| Duration::from_secs_f64(clients as f64 * batch as f64 / rate));
        self.send_for(&[(self.publish_request(queue, batch, body), batch as u64)], clients, seconds, every).await
    }

    /// W8's batch side: `clients` connections each publishing batches of `batch` to the `queues` in
    /// turn, for `seconds`; returns the messages stored and the seconds taken.
    pub async fn publish_in_turn(
        &self,
        queues: &[String],
        (clients, batch): (usize, usize),
        body: &str,
        seconds: f64,
    ) -> anyhow::Result<(u64, f64)> {
        let requests: Vec<(Request, u64)> =
            queues.iter().map(|q| (self.publish_request(q, batch, body), batch as u64)).collect();
        self.send_for(&requests, clients, seconds, None).await
    }

    /// W8's topic side: `clients` connections each publishing batches of `batch` to the topic, whose
    /// key reaches `reached` queues, for `seconds`; returns the messages stored (a copy in each queue
    /// counting one) and the seconds taken.
    pub async fn publish_to_topic(
        &self,
        topic: &str,
        (clients, batch, reached): (usize, usize, usize),
        body: &str,
        seconds: f64,
    ) -> anyhow::Result<(u64, f64)> {
        let messages = vec![json!({"body": body, "content_type": "text"}); batch];
        let body = json!({"routing_key": "orders.eu.created", "messages": messages}).to_string();
        let path = format!("/client/v4/accounts/{}/topics/{topic}/messages", self.account);
        let request = Request::post(&self.host, &path, &self.token, body.as_bytes());
        self.send_for(&[(request, (batch * reached) as u64)], clients, seconds, None).await
    }

    /// `clients` connections sending the `requests` in turn, each counting the messages it stores, for
    /// `seconds`, at most one a connection every `every` when given.
    async fn send_for(
        &self,
        requests: &[(Request, u64)],
        clients: usize,
        seconds: f64,
        every: Option<Duration>,
    ) -> anyhow::Result<(u64, f64)> {
        let done = Arc::new(AtomicU64::new(0));
        let started = Instant::now();
        let until = started + Duration::from_secs_f64(seconds);
        let mut tasks = tokio::task::JoinSet::new();
        for client in 0..clients {
            let (host, requests, done) = (self.host.clone(), requests.to_vec(), done.clone());
            let mut pace = every.map(|every| {
                let mut pace = tokio::time::interval(every);
                pace.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                pace
            });
            tasks.spawn(async move {
                let mut connection = Connection::open(&host).await?;
                // Clients start at different requests, so that the queues are published to evenly.
                let mut turn = requests.iter().cycle().skip(client % requests.len());
                while Instant::now() < until {
                    if let Some(pace) = pace.as_mut() {
                        pace.tick().await;
                    }
                    let (request, messages) = turn.next().expect("a cycle never ends");
                    let answer = connection.send(request).await?;
                    if answer.status != 200 {
                        bail!("publish: {} {}", answer.status, String::from_utf8_lossy(&answer.body));
                    }
                    done.fetch_add(*messages, Ordering::Relaxed);
                }
                Ok(())
            });
        }
        while let Some(task) = tasks.join_next().await {
            task??;
        }
        Ok((done.load(Ordering::Relaxed), started.elapsed().as_secs_f64()))
    }

    /// W1k: `clients` connections publishing batches of `batch` messages that each carry a key unique to
    /// the run (`nonce`), for `seconds`. Returns the messages, the seconds and each client's batch count,
    /// which `publish_keyed_again` sends once more (W1d).
    pub async fn publish_keyed(
        &self,
        queue: &str,
        clients: usize,
        batch: usize,
        body: &str,
        seconds: f64,
        nonce: u64,
    ) -> anyhow::Result<(u64, f64, Vec<u64>)> {
        let started = Instant::now();
        let until = started + Duration::from_secs_f64(seconds);
        let mut tasks = tokio::task::JoinSet::new();
        for client in 0..clients {
            let keyed =
                Keyed { api: self.clone(), queue: queue.to_owned(), batch, body: body.to_owned(), nonce, client };
            tasks.spawn(async move { keyed.send(Err(until)).await });
        }
        let mut sent = vec![0; clients];
        while let Some(task) = tasks.join_next().await {
            let (client, rounds) = task??;
            sent[client] = rounds;
        }
        Ok((sent.iter().sum::<u64>() * batch as u64, started.elapsed().as_secs_f64(), sent))
    }

    /// W1d: the batches `publish_keyed` sent (`sent`, per client), again; every message a duplicate.
    pub async fn publish_keyed_again(
        &self,
        queue: &str,
        batch: usize,
        body: &str,
        nonce: u64,
        sent: &[u64],
    ) -> anyhow::Result<(u64, f64)> {
        let started = Instant::now();
        let mut tasks = tokio::task::JoinSet::new();
        for (client, rounds) in sent.iter().copied().enumerate() {
            let keyed =
                Keyed { api: self.clone(), queue: queue.to_owned(), batch, body: body.to_owned(), nonce, client };
            tasks.spawn(async move { keyed.send(Ok(rounds)).await });
        }
        while let Some(task) = tasks.join_next().await {
            task??;
        }
        Ok((sent.iter().sum::<u64>() * batch as u64, started.elapsed().as_secs_f64()))
    }

    /// Fills the queue with `count` messages of `body`, in batches of 100 over four connections.
    pub async fn preload(&self, queue: &str, count: u64, body: &str) -> anyhow::Result<()> {
        let messages = vec![json!({"body": body, "content_type": "text"}); 100];
        let batch = json!({ "messages": messages }).to_string();
        self.publish_numbered(queue, count.div_ceil(100), move |_| batch.clone()).await
    }

    /// W2o's and W2f's preload: as `preload`, but message i (counted from 0 over the whole preload)
    /// carries the key `k{i % keys}` in `field` (`ordering_key`, `flow_control_key`), so that the keys take
    /// turns as the drain goes.
    pub async fn preload_keyed(
        &self,
        queue: &str,
        count: u64,
        body: &str,
        keys: u64,
        field: &'static str,
    ) -> anyhow::Result<()> {
        let body = serde_json::to_string(body).expect("a string encodes");
        let batches = count.div_ceil(100);
        self.publish_numbered(queue, batches, move |batch| keyed_batch(&body, batch * 100, keys, field)).await
    }

    /// Publishes batches `0..batches` to `queue` over four connections, each taking the next number;
    /// `batch(n)` is the JSON of batch n's request.
    pub async fn publish_numbered(
        &self,
        queue: &str,
        batches: u64,
        batch: impl Fn(u64) -> String + Clone + Send + 'static,
    ) -> anyhow::Result<()> {
        let next = Arc::new(AtomicU64::new(0));
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..4 {
            let (api, queue, next, batch) = (self.clone(), queue.to_owned(), next.clone(), batch.clone());
            tasks.spawn(async move {
                let mut connection = Connection::open(&api.host).await?;
                loop {
                    let n = next.fetch_add(1, Ordering::Relaxed);
                    if n >= batches {
                        break;
                    }
                    let answer = connection.send(&api.request(&queue, "/batch", batch(n).as_bytes())).await?;
                    if answer.status != 200 {
                        bail!("publish: {} {}", answer.status, String::from_utf8_lossy(&answer.body));
                    }
                }
                anyhow::Ok(())
            });
        }
        while let Some(task) = tasks.join_next().await {
            task??;
        }
        Ok(())
    }

    /// `consumers` connections each pulling 100 and acking them, until `seconds` pass or the queue is
    /// empty.
    pub async fn drain(&self, queue: &str, consumers: usize, seconds: f64) -> anyhow::Result<Drained> {
        self.drain_as(queue, None, consumers, seconds).await
    }

    /// As `drain`, the pulls naming `consumer` (`consumer_id`) when the queue has several.
    pub async fn drain_as(
        &self,
        queue: &str,
        consumer: Option<&str>,
        consumers: usize,
        seconds: f64,
    ) -> anyhow::Result<Drained> {
        let pull = Arc::new(pull_body(consumer));
        let done = Arc::new(AtomicU64::new(0));
        let pulls = Arc::new(Mutex::new(Vec::new()));
        let started = Instant::now();
        let until = started + Duration::from_secs_f64(seconds);
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..consumers {
            let (api, queue, done, pulls, pull) =
                (self.clone(), queue.to_owned(), done.clone(), pulls.clone(), pull.clone());
            tasks.spawn(async move {
                let mut connection = Connection::open(&api.host).await?;
                let mut timings = Vec::new();
                while Instant::now() < until {
                    let pulled = Instant::now();
                    let acked = api.pull_and_ack_with(&mut connection, &queue, pull.as_bytes()).await?;
                    timings.push(pulled.elapsed());
                    if acked == 0 {
                        break;
                    }
                    done.fetch_add(acked, Ordering::Relaxed);
                }
                pulls.lock().expect("pull timings").extend(timings);
                anyhow::Ok(())
            });
        }
        while let Some(task) = tasks.join_next().await {
            task??;
        }
        let pulls = std::mem::take(&mut *pulls.lock().expect("pull timings"));
        Ok(Drained { messages: done.load(Ordering::Relaxed), seconds: started.elapsed().as_secs_f64(), pulls })
    }

    /// W2b: as `drain`, but each pull carries the acks of the batch before it (one request per batch);
    /// the last batch's acks go alone. Returns the messages acked and the seconds taken.
    pub async fn drain_carrying_acks(&self, queue: &str, consumers: usize, seconds: f64) -> anyhow::Result<(u64, f64)> {
        let done = Arc::new(AtomicU64::new(0));
        let started = Instant::now();
        let until = started + Duration::from_secs_f64(seconds);
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..consumers {
            let (api, queue, done) = (self.clone(), queue.to_owned(), done.clone());
            tasks.spawn(async move {
                let mut connection = Connection::open(&api.host).await?;
                let mut pending: Vec<String> = Vec::new();
                let acks = |leases: &[String]| {
                    leases.iter().map(|l| format!(r#"{{"lease_id":"{l}"}}"#)).collect::<Vec<_>>().join(",")
                };
                while Instant::now() < until {
                    let body =
                        format!(r#"{{"batch_size":100,"visibility_timeout_ms":60000,"acks":[{}]}}"#, acks(&pending));
                    let answer = connection.send(&api.request(&queue, "/pull", body.as_bytes())).await?;
                    if answer.status != 200 {
                        bail!("pull carrying acks: {} {}", answer.status, String::from_utf8_lossy(&answer.body));
                    }
                    done.fetch_add(pending.len() as u64, Ordering::Relaxed);
                    let pulled: Pulled<'_> = serde_json::from_slice(&answer.body).context("a pull answer")?;
                    pending = pulled.result.messages.iter().map(|m| m.lease_id.to_owned()).collect();
                    if pending.is_empty() {
                        break;
                    }
                }
                // The last batch's acks, on their own.
                if !pending.is_empty() {
                    let body = format!(r#"{{"acks":[{}]}}"#, acks(&pending));
                    let answer = connection.send(&api.request(&queue, "/ack", body.as_bytes())).await?;
                    if answer.status != 200 {
                        bail!("ack: {} {}", answer.status, String::from_utf8_lossy(&answer.body));
                    }
                    done.fetch_add(pending.len() as u64, Ordering::Relaxed);
                }
                anyhow::Ok(())
            });
        }
        while let Some(task) = tasks.join_next().await {
            task??;
        }
        Ok((done.load(Ordering::Relaxed), started.elapsed().as_secs_f64()))
    }

    /// Pulls up to 100 messages and acks them all; returns how many.
    pub async fn pull_and_ack(&self, connection: &mut Connection, queue: &str) -> anyhow::Result<u64> {
        self.pull_and_ack_with(connection, queue, PULL.as_bytes()).await
    }

    /// As `pull_and_ack`, with the pull's body given.
    async fn pull_and_ack_with(&self, connection: &mut Connection, queue: &str, body: &[u8]) -> anyhow::Result<u64> {
        let pull = self.request(queue, "/pull", body);
        let answer = connection.send(&pull).await?;
        if answer.status != 200 {
            bail!("pull: {} {}", answer.status, String::from_utf8_lossy(&answer.body));
        }
        let pulled: Pulled<'_> = serde_json::from_slice(&answer.body).context("a pull answer")?;
        let leases = &pulled.result.messages;
        if leases.is_empty() {
            return Ok(0);
        }
        let mut acks = String::with_capacity(16 + leases.len() * 64);
        acks.push_str(r#"{"acks":["#);
        for (i, lease) in leases.iter().enumerate() {
            if i > 0 {
                acks.push(',');
            }
            acks.push_str(r#"{"lease_id":""#);
            acks.push_str(lease.lease_id);
            acks.push_str(r#""}"#);
        }
        acks.push_str("]}");
        let answer = connection.send(&self.request(queue, "/ack", acks.as_bytes())).await?;
        if answer.status != 200 {
            bail!("ack: {} {}", answer.status, String::from_utf8_lossy(&answer.body));
        }
        Ok(leases.len() as u64)
    }

    /// The steady cycle: `clients` connections each publishing 100 messages, then pulling 100 and acking
    /// them, for `intervals` intervals of `interval` seconds; returns messages acked per second in each.
    pub async fn cycle(
        &self,
        queue: &str,
        clients: usize,
        body: &str,
        intervals: usize,
        interval: f64,
    ) -> anyhow::Result<Vec<f64>> {
        let publish = self.publish_request(queue, 100, body);
        let done = Arc::new(AtomicU64::new(0));
        let started = Instant::now();
        let until = started + Duration::from_secs_f64(interval * intervals as f64);
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..clients {
            let (api, queue, publish, done) = (self.clone(), queue.to_owned(), publish.clone(), done.clone());
            tasks.spawn(async move {
                let mut connection = Connection::open(&api.host).await?;
                while Instant::now() < until {
                    let answer = connection.send(&publish).await?;
                    if answer.status != 200 {
                        bail!("publish: {} {}", answer.status, String::from_utf8_lossy(&answer.body));
                    }
                    let acked = api.pull_and_ack(&mut connection, &queue).await?;
                    done.fetch_add(acked, Ordering::Relaxed);
                }
                anyhow::Ok(())
            });
        }
        let rates = sample_rates(&done, started, intervals, interval).await;
        while let Some(task) = tasks.join_next().await {
            task??;
        }
        Ok(rates)
    }
}

/// Reads `counter` at the end of each of `intervals` intervals of `interval` seconds after `started`;
/// returns the increase per second in each.
pub async fn sample_rates(counter: &AtomicU64, started: Instant, intervals: usize, interval: f64) -> Vec<f64> {
    let mut rates = Vec::with_capacity(intervals);
    let mut last = counter.load(Ordering::Relaxed);
    for i in 1..=intervals {
        tokio::time::sleep_until((started + Duration::from_secs_f64(interval * i as f64)).into()).await;
        let now = counter.load(Ordering::Relaxed);
        rates.push((now - last) as f64 / interval);
        last = now;
    }
    rates
}

/// The width of a batch's number in W1k's keys (`{nonce}-{client}-{batch}-{i}`), zero-padded.
const BATCH_DIGITS: usize = 10;

/// One client of W1k/W1d: its batches are numbered, so a second pass can send exactly the same ones.
struct Keyed {
    api: Api,
    queue: String,
    batch: usize,
    body: String,
    nonce: u64,
    client: usize,
}

impl Keyed {
    /// Batch 0's request, and where each key's batch number sits in its body. Written by hand around
    /// the body's JSON text, encoded once; a later batch rewrites only the numbers' digits (see `send`):
    /// building every batch anew cost the client 0.3 µs more per message than W1's one request, CPU
    /// taken from the server on a small machine.
    fn template(&self) -> (Request, Vec<usize>) {
        use std::fmt::Write;
        let (nonce, client) = (self.nonce, self.client);
        let body = serde_json::to_string(&self.body).expect("a string encodes");
        let mut text = String::with_capacity(self.batch * (body.len() + 96) + 16);
        let mut numbers = Vec::with_capacity(self.batch);
        text.push_str(r#"{"messages":["#);
        for i in 0..self.batch {
            if i > 0 {
                text.push(',');
            }
            write!(text, r#"{{"body":{body},"content_type":"text","idempotency_key":"{nonce}-{client}-"#)
                .expect("a String takes any text");
            numbers.push(text.len());
            write!(text, r#"{:0width$}-{i}"}}"#, 0, width = BATCH_DIGITS).expect("a String takes any text");
        }
        text.push_str("]}");
        (self.api.request(&self.queue, "/batch", text.as_bytes()), numbers)
    }

    /// Sends batches until the deadline (`Err`), every message new; or the first `rounds` batches
    /// again (`Ok`), every message a duplicate. Returns the client and how many batches it sent.
    async fn send(self, rounds: Result<u64, Instant>) -> anyhow::Result<(usize, u64)> {
        let mut connection = Connection::open(&self.api.host).await?;
        let expected = format!("\"duplicates\":{}", if rounds.is_ok() { self.batch } else { 0 });
        let (mut request, numbers) = self.template();
        let mut round = 0;
        while match rounds {
            Ok(total) => round < total,
            Err(until) => Instant::now() < until,
        } {
            request.overwrite_body(&numbers, format!("{round:0width$}", width = BATCH_DIGITS).as_bytes());
            let answer = connection.send(&request).await?;
            let text = String::from_utf8_lossy(&answer.body);
            if answer.status != 200 || !text.contains(&expected) {
                bail!("keyed publish: expected 200 with {expected}, got {} {text}", answer.status);
            }
            round += 1;
        }
        Ok((self.client, round))
    }
}

/// A batch of 100 messages of `body` (already JSON text), the first numbered `first`, each with the
/// key `k{number % keys}` in `field`; written by hand, as `Keyed::template` is.
fn keyed_batch(body: &str, first: u64, keys: u64, field: &str) -> String {
    use std::fmt::Write;
    let mut text = String::with_capacity(100 * (body.len() + 64) + 16);
    text.push_str(r#"{"messages":["#);
    for i in first..first + 100 {
        if i > first {
            text.push(',');
        }
        write!(text, r#"{{"body":{body},"content_type":"text","{field}":"k{}"}}"#, i % keys)
            .expect("a String takes any text");
    }
    text.push_str("]}");
    text
}
