//! W6 idle: many accounts, each with webhook consumers and pull queues, and no traffic at all; the
//! figure is the CPU the service and PostgreSQL spend over a window, as a share of one core. A hosted
//! service carries thousands of idle tenants: their cost must not grow with their number.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use actix_web::{web, HttpResponse};
use anyhow::Context;
use futures_util::stream::{self, StreamExt, TryStreamExt};
use serde_json::json;

use crate::cpu;
use crate::setup::{self, Env};

#[derive(clap::Args, Debug, Clone)]
pub struct IdleArgs {
    /// Accounts, each with the queues below.
    #[arg(long, default_value_t = 1_000)]
    pub accounts: usize,
    /// Queues with a webhook consumer, per account.
    #[arg(long, default_value_t = 10)]
    pub webhooks: usize,
    /// Queues with a pull consumer, per account.
    #[arg(long, default_value_t = 10)]
    pub pulls: usize,
    /// Dispatcher-only nodes started beside the node that runs both roles.
    #[arg(long, default_value_t = 0)]
    pub extra_dispatchers: usize,
    /// How long the CPU is measured, after a warm-up.
    #[arg(long, default_value_t = 30)]
    pub seconds: u64,
}

/// How many creations run at once.
const CONCURRENCY: usize = 16;
/// After the last creation: every node has read the consumers, started its workers and gone quiet.
const WARM_UP: Duration = Duration::from_secs(10);

async fn receive(hits: web::Data<AtomicUsize>) -> HttpResponse {
    hits.fetch_add(1, Ordering::Relaxed);
    HttpResponse::Ok().finish()
}

struct Tenant {
    account: String,
    token: String,
}

pub async fn run(args: IdleArgs) -> anyhow::Result<()> {
    let hits = web::Data::new(AtomicUsize::new(0));
    let (port, receiver) = setup::start_receiver(hits.clone(), receive)?;
    let allow = [("SKIPLOCK_WEBHOOK_ALLOW_CIDRS", "127.0.0.0/8".to_owned())];
    let env = Env::start(&allow).await?;
    let started = Instant::now();
    populate(&env, &args, &format!("http://127.0.0.1:{port}/hook")).await?;
    let created = started.elapsed();
    let mut nodes = vec![env.server.id().context("the server runs")?];
    let mut extra = Vec::new();
    for _ in 0..args.extra_dispatchers {
        let child = setup::serve_dispatcher(&env.database_url, &allow).await?;
        nodes.push(child.id().context("the dispatcher runs")?);
        extra.push(child);
    }
    tokio::time::sleep(WARM_UP).await;
    let postmaster = env.postmaster_pid().await?;
    let before = cpu::sample(&nodes, postmaster);
    tokio::time::sleep(Duration::from_secs(args.seconds)).await;
    let used = cpu::sample(&nodes, postmaster) - before;
    let share = |seconds: f64| seconds / args.seconds as f64 * 100.0;
    let (service, postgres) = (share(used.server), share(used.postgres));
    let consumers = args.accounts * args.webhooks;
    let queues = args.accounts * args.pulls;
    let nodes_text = if args.extra_dispatchers == 0 {
        "one node (API and dispatcher)".to_owned()
    } else {
        format!("one node and {} dispatcher node(s)", args.extra_dispatchers)
    };
    println!(
        "W6 idle, {consumers} webhook consumers and {queues} pull queues over {} accounts, {nodes_text}, \
         {} s: service {service:.2}% of a core (all nodes), PostgreSQL {postgres:.2}%; deliveries {} \
         (set-up took {:.0} s)",
        args.accounts,
        args.seconds,
        hits.load(Ordering::Relaxed),
        created.as_secs_f64()
    );
    let result = json!({
        "workload": "W6 idle: webhook consumers and pull queues over many accounts, no traffic",
        "accounts": args.accounts, "webhook_consumers": consumers, "pull_queues": queues,
        "extra_dispatcher_nodes": args.extra_dispatchers, "seconds": args.seconds,
        "service_cpu_percent_of_core": service, "postgres_cpu_percent_of_core": postgres,
        "deliveries": hits.load(Ordering::Relaxed), "setup_seconds": created.as_secs_f64(),
        "at": chrono::Utc::now().to_rfc3339(),
    });
    for mut child in extra {
        child.kill().await.ok();
    }
    receiver.stop(false).await;
    env.finish().await?;
    setup::write_result("idle", &result)
}

/// Makes `accounts` accounts besides the environment's own (counted in), each with `webhooks` queues
/// with a webhook consumer delivering to `hook` and `pulls` queues with a pull consumer.
pub async fn populate(env: &Env, args: &IdleArgs, hook: &str) -> anyhow::Result<()> {
    let mut tenants = vec![Tenant { account: env.account.clone(), token: env.token.clone() }];
    let others: Vec<Tenant> = stream::iter(1..args.accounts)
        .map(|i| {
            let url = env.database_url.clone();
            async move {
                let (account, token) = setup::create_account(&url, &format!("idle-{i}")).await?;
                Ok::<_, anyhow::Error>(Tenant { account, token })
            }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect()
        .await?;
    tenants.extend(others);
    let creations = tenants.iter().flat_map(|t| {
        let kinds = std::iter::repeat_n("webhook", args.webhooks).chain(std::iter::repeat_n("http_pull", args.pulls));
        kinds.enumerate().map(move |(i, kind)| (t, i, kind))
    });
    stream::iter(creations)
        .map(|(t, i, kind)| create_queue(env, t, i, kind, hook))
        .buffer_unordered(CONCURRENCY)
        .try_collect::<()>()
        .await
}

/// Creates queue `i` of `tenant` with a consumer of `kind`.
async fn create_queue(env: &Env, tenant: &Tenant, i: usize, kind: &str, hook: &str) -> anyhow::Result<()> {
    let consumer = match kind {
        "webhook" => json!({"type": "webhook", "url": hook}),
        _ => json!({"type": "http_pull"}),
    };
    let name = format!("{}-{i}", kind.replace('_', "-"));
    env.queue_with_consumer((&tenant.account, &tenant.token), &name, consumer).await?;
    Ok(())
}
