//! RabbitMQ as a peer in the benchmark: one durable classic queue, persistent messages
//! (delivery_mode 2), publisher confirms and manual acks, driven through `lapin` on tokio.
//!
//! Every client gets its own channel on one shared connection (lapin runs one I/O thread per
//! connection, and the machine is small). Runs are bounded by a deadline that every task checks
//! between rounds; waits for deliveries are bounded too, so nothing hangs past the deadline + 1 s
//! (a publish round that the broker never confirms fails after 30 s instead of hanging).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use futures_util::{future::join_all, StreamExt};
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicPublishOptions, BasicQosOptions, ConfirmSelectOptions,
    QueueDeclareOptions, QueueDeleteOptions, QueuePurgeOptions,
};
use lapin::types::{AMQPValue, FieldTable};
use lapin::uri::AMQPUri;
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties, Consumer};
use tokio::task::JoinHandle;
use tokio::time::timeout;

/// A drain consumer that sees no delivery for this long asks the broker whether the queue is empty.
const IDLE: Duration = Duration::from_millis(200);
/// How long a cycle task may wait for deliveries past the deadline before it gives up.
const GRACE: Duration = Duration::from_secs(1);
/// Messages per confirm wait in `preload`, and how many channels share the work.
const PRELOAD_CHUNK: u64 = 1000;
const PRELOAD_CHANNELS: u64 = 4;
/// A round whose confirms take longer than this is an error (e.g. a broker resource alarm blocking
/// publishers), not something to wait out.
const CONFIRM_TIMEOUT: Duration = Duration::from_secs(30);

/// A RabbitMQ broker to measure beside skiplock: one durable queue, persistent 1 KiB messages,
/// publisher confirms, manual acks.
pub struct Rabbit {
    /// Made again when it was lost: the broker can drop an idle connection while the other systems run.
    conn: tokio::sync::Mutex<Connection>,
    uri: AMQPUri,
    queue: String,
}

impl Rabbit {
    /// Connects to `url` (amqp://guest:guest@127.0.0.1:5672/%2f) and declares a fresh durable queue named
    /// `queue` (deleting any old one first). Ok(None) when nothing answers at that address within ~2 s
    /// (RabbitMQ is optional), Err for other failures.
    pub async fn connect(url: &str, queue: &str) -> anyhow::Result<Option<Rabbit>> {
        let uri: AMQPUri = url.parse().map_err(|e| anyhow!("bad AMQP url {url}: {e}"))?;
        // Probe the port first, so "nothing listening" (not an error: RabbitMQ is optional) is told apart
        // from a broker that answers but refuses us (bad credentials, vhost), which is.
        let addr = (uri.authority.host.clone(), uri.authority.port);
        if !matches!(timeout(Duration::from_secs(2), tokio::net::TcpStream::connect(addr)).await, Ok(Ok(_))) {
            return Ok(None);
        }
        let conn = open(&uri).await.with_context(|| format!("connecting to RabbitMQ at {url}"))?;
        let rabbit = Rabbit { conn: tokio::sync::Mutex::new(conn), uri, queue: queue.to_string() };
        let ch = rabbit.channel().await?;
        // Deleting a queue that does not exist is fine on RabbitMQ (delete-ok with 0 messages).
        ch.queue_delete(queue.into(), QueueDeleteOptions::default()).await.context("deleting the old queue")?;
        let mut args = FieldTable::default();
        args.insert("x-queue-type".into(), AMQPValue::LongString("classic".into()));
        ch.queue_declare(queue.into(), QueueDeclareOptions::durable(), args).await.context("declaring the queue")?;
        close_channel(&ch).await?;
        Ok(Some(rabbit))
    }

    /// `clients` concurrent publishers, each on its own channel in confirm mode, for `seconds`:
    /// each round publishes `batch` persistent messages of `body` and waits until all of them are confirmed.
    /// Returns the number of messages confirmed (acked by the broker) and the elapsed seconds.
    pub async fn publish(&self, clients: usize, batch: usize, body: &[u8], seconds: f64) -> anyhow::Result<(u64, f64)> {
        let body: Arc<[u8]> = body.into();
        let mut tasks = Vec::new();
        for _ in 0..clients {
            tasks.push((self.publisher().await?, self.queue.clone(), body.clone()));
        }
        let start = Instant::now();
        let deadline = start + Duration::from_secs_f64(seconds);
        let handles = tasks.into_iter().map(|(ch, queue, body)| {
            tokio::spawn(async move {
                let mut confirmed = 0;
                while Instant::now() < deadline {
                    confirmed += publish_round(&ch, &queue, batch, &body).await?;
                }
                close_channel(&ch).await?;
                Ok(confirmed)
            })
        });
        let confirmed = join(handles.collect()).await?.into_iter().sum();
        Ok((confirmed, start.elapsed().as_secs_f64()))
    }

    /// Fills the queue with `count` persistent messages of `body` (fast: confirm in big batches); returns when confirmed.
    pub async fn preload(&self, count: u64, body: &[u8]) -> anyhow::Result<()> {
        let body: Arc<[u8]> = body.into();
        let mut handles = Vec::new();
        for i in 0..PRELOAD_CHANNELS {
            // Spread `count` over the channels; the first ones take the remainder.
            let mut left = count / PRELOAD_CHANNELS + u64::from(i < count % PRELOAD_CHANNELS);
            let (ch, queue, body) = (self.publisher().await?, self.queue.clone(), body.clone());
            handles.push(tokio::spawn(async move {
                while left > 0 {
                    let n = left.min(PRELOAD_CHUNK);
                    let acked = publish_round(&ch, &queue, n as usize, &body).await?;
                    if acked != n {
                        bail!("preload: the broker nacked {} of {n} messages", n - acked);
                    }
                    left -= n;
                }
                close_channel(&ch).await
            }));
        }
        join(handles).await.map(drop)
    }

    /// `consumers` concurrent consumers, each on its own channel with prefetch (basic.qos) = `batch`,
    /// consuming with manual acks: after receiving `batch` deliveries (or fewer if the queue ran dry),
    /// ack them with one multiple-ack of the last delivery tag. Runs for `seconds` or until the queue is
    /// empty (no delivery for ~200 ms). Returns messages acked and elapsed seconds.
    pub async fn drain(&self, consumers: usize, batch: usize, seconds: f64) -> anyhow::Result<(u64, f64)> {
        let mut tasks = Vec::new();
        for _ in 0..consumers {
            tasks.push(self.consumer(batch, false).await?);
        }
        let start = Instant::now();
        let deadline = start + Duration::from_secs_f64(seconds);
        let handles = tasks.into_iter().map(|(ch, mut consumer)| {
            let queue = self.queue.clone();
            tokio::spawn(async move {
                let (mut acked, mut last_ack) = (0, start);
                while Instant::now() < deadline {
                    let got = take_and_ack(&ch, &mut consumer, batch, IDLE, deadline).await?;
                    if got > 0 {
                        (acked, last_ack) = (acked + got, Instant::now());
                    }
                    // A short group means an idle gap: stop only if the broker agrees nothing is ready
                    // (a busy broker can pause deliveries for longer than IDLE while messages remain).
                    if got < batch as u64 && ready(&ch, &queue).await? == 0 {
                        break;
                    }
                }
                // Closing the channel requeues anything prefetched but not acked.
                close_channel(&ch).await?;
                Ok((acked, last_ack))
            })
        });
        let results = join(handles.collect()).await?;
        // Time up to the last ack, so the idle wait that detects an empty queue is not counted.
        let end = results.iter().map(|&(_, at)| at).max().unwrap_or(start);
        let elapsed = if end > start { end - start } else { start.elapsed() };
        Ok((results.iter().map(|&(n, _)| n).sum(), elapsed.as_secs_f64()))
    }

    /// The steady cycle: `clients` tasks, each repeating: publish `batch` persistent messages and wait for
    /// their confirms, then receive `batch` deliveries and ack them (multiple ack). Returns messages acked
    /// per second in each of `intervals` intervals of `interval_seconds`.
    pub async fn cycle(
        &self,
        clients: usize,
        batch: usize,
        body: &[u8],
        intervals: usize,
        interval_seconds: f64,
    ) -> anyhow::Result<Vec<f64>> {
        let body: Arc<[u8]> = body.into();
        // All consumers exist before anyone publishes: with prefetch = batch each, the broker can always
        // hand every waiting task a full batch, so no task starves while others hold its messages.
        let mut tasks = Vec::new();
        for _ in 0..clients {
            let (ch, consumer) = self.consumer(batch, true).await?;
            tasks.push((ch, consumer, self.queue.clone(), body.clone()));
        }
        let acked = Arc::new(AtomicU64::new(0));
        let interval = Duration::from_secs_f64(interval_seconds);
        let start = Instant::now();
        let deadline = start + interval * intervals as u32;
        let handles: Vec<_> = tasks
            .into_iter()
            .map(|(ch, mut consumer, queue, body)| {
                let acked = acked.clone();
                tokio::spawn(async move {
                    while Instant::now() < deadline {
                        publish_round(&ch, &queue, batch, &body).await?;
                        // Deliveries may be other tasks' messages; any `batch` of them will do.
                        let got = take_and_ack(&ch, &mut consumer, batch, Duration::MAX, deadline + GRACE).await?;
                        acked.fetch_add(got, Ordering::Relaxed);
                    }
                    close_channel(&ch).await
                })
            })
            .collect();
        // Sample the shared counter at each interval boundary.
        let mut rates = Vec::with_capacity(intervals);
        let (mut last, mut last_at) = (0, start);
        for i in 1..=intervals as u32 {
            tokio::time::sleep_until((start + interval * i).into()).await;
            let (now, now_at) = (acked.load(Ordering::Relaxed), Instant::now());
            rates.push((now - last) as f64 / (now_at - last_at).as_secs_f64());
            (last, last_at) = (now, now_at);
        }
        join(handles).await?;
        Ok(rates)
    }

    /// Deletes the queue and closes the connection.
    pub async fn close(self) -> anyhow::Result<()> {
        let ch = self.channel().await?;
        ch.queue_delete(self.queue.as_str().into(), QueueDeleteOptions::default())
            .await
            .context("deleting the queue")?;
        self.conn.into_inner().close(200, "bye".into()).await.context("closing the RabbitMQ connection")
    }

    /// Empties the queue, so the next workload starts from nothing.
    pub async fn purge(&self) -> anyhow::Result<()> {
        let ch = self.channel().await?;
        ch.queue_purge(self.queue.as_str().into(), QueuePurgeOptions::default()).await.context("queue.purge")?;
        close_channel(&ch).await
    }

    async fn channel(&self) -> anyhow::Result<Channel> {
        let mut conn = self.conn.lock().await;
        if !conn.status().connected() {
            *conn = open(&self.uri).await?;
        }
        conn.create_channel().await.context("opening a RabbitMQ channel")
    }

    /// A channel in confirm mode.
    async fn publisher(&self) -> anyhow::Result<Channel> {
        let ch = self.channel().await?;
        ch.confirm_select(ConfirmSelectOptions::default()).await.context("confirm.select")?;
        Ok(ch)
    }

    /// A channel with prefetch `batch` and a manual-ack consumer on the queue, in confirm mode if `confirm`.
    async fn consumer(&self, batch: usize, confirm: bool) -> anyhow::Result<(Channel, Consumer)> {
        let ch = if confirm { self.publisher().await? } else { self.channel().await? };
        let prefetch = u16::try_from(batch).context("batch exceeds the AMQP prefetch limit (65535)")?;
        ch.basic_qos(prefetch, BasicQosOptions::default()).await.context("basic.qos")?;
        let options = BasicConsumeOptions { no_ack: false, ..BasicConsumeOptions::default() };
        let consumer = ch
            .basic_consume(self.queue.as_str().into(), "".into(), options, FieldTable::default())
            .await
            .context("basic.consume")?;
        Ok((ch, consumer))
    }
}

/// Publishes `batch` persistent messages on a confirm-mode channel and waits for every confirm;
/// returns how many the broker acked (nacks are not counted).
async fn publish_round(ch: &Channel, queue: &str, batch: usize, body: &[u8]) -> anyhow::Result<u64> {
    timeout(CONFIRM_TIMEOUT, publish_and_confirm(ch, queue, batch, body))
        .await
        .with_context(|| format!("{batch} publishes not confirmed within {CONFIRM_TIMEOUT:?}"))?
}

async fn publish_and_confirm(ch: &Channel, queue: &str, batch: usize, body: &[u8]) -> anyhow::Result<u64> {
    let props = BasicProperties::default().with_delivery_mode(2);
    // Issue the publishes together so lapin writes them in few syscalls; confirms come back in order.
    let sends = (0..batch)
        .map(|_| ch.basic_publish("".into(), queue.into(), BasicPublishOptions::default(), body, props.clone()));
    let mut acked = 0;
    for sent in join_all(sends).await {
        let confirm = sent.context("basic.publish")?.await.context("waiting for a publisher confirm")?;
        acked += u64::from(confirm.is_ack());
    }
    Ok(acked)
}

/// Receives up to `batch` deliveries, giving up when none comes for `idle` or at `until`, then acks
/// them all with one multiple-ack of the last tag. Returns how many were acked.
async fn take_and_ack(
    ch: &Channel,
    consumer: &mut Consumer,
    batch: usize,
    idle: Duration,
    until: Instant,
) -> anyhow::Result<u64> {
    let (mut got, mut last_tag) = (0, None);
    while got < batch as u64 {
        let wait = idle.min(until.saturating_duration_since(Instant::now()));
        match timeout(wait, consumer.next()).await {
            Err(_) => break,
            Ok(None) => bail!("the broker cancelled the consumer"),
            Ok(Some(delivery)) => {
                last_tag = Some(delivery.context("receiving a delivery")?.delivery_tag);
                got += 1;
            }
        }
    }
    if let Some(tag) = last_tag {
        ch.basic_ack(tag, BasicAckOptions { multiple: true }).await.context("basic.ack")?;
    }
    Ok(got)
}

/// Messages ready in `queue`, from a passive queue.declare on `ch`.
async fn ready(ch: &Channel, queue: &str) -> anyhow::Result<u32> {
    let options = QueueDeclareOptions { passive: true, ..QueueDeclareOptions::default() };
    let q = ch.queue_declare(queue.into(), options, FieldTable::default()).await.context("queue.declare (passive)")?;
    Ok(q.message_count())
}

async fn close_channel(ch: &Channel) -> anyhow::Result<()> {
    ch.close(200, "done".into()).await.context("closing a RabbitMQ channel")
}

/// Waits for every task; the first error (or panic) wins.
async fn join<T>(handles: Vec<JoinHandle<anyhow::Result<T>>>) -> anyhow::Result<Vec<T>> {
    let mut out = Vec::with_capacity(handles.len());
    for handle in handles {
        out.push(handle.await.context("a RabbitMQ task panicked")??);
    }
    Ok(out)
}

/// Opens a connection to the broker at `uri`.
async fn open(uri: &AMQPUri) -> anyhow::Result<Connection> {
    timeout(Duration::from_secs(10), Connection::connect_uri(uri.clone(), ConnectionProperties::default()))
        .await
        .context("AMQP handshake timed out")?
        .context("connecting to RabbitMQ")
}
