//! skiplock-bench: load generators that measure a real skiplock process on a real PostgreSQL.
//!
//!   skiplock-bench latency [--rate 1000] [--seconds 20]
//!       publish -> webhook arrival latency at max_wait_time_ms = 0, at a fixed publish rate.
//!   skiplock-bench idle [--accounts 1000] [--extra-dispatchers 1]
//!       W6 idle: CPU of the service and PostgreSQL with many idle tenants and no traffic.
//!   skiplock-bench neighbour [--seconds 15]
//!       W6 noisy neighbour: a quiet account at 100 msg/s beside one at full W1 speed.
//!   skiplock-bench spread [--accounts 100 --queues 10]
//!       W6 spread: W1 and W2 over many queues in many accounts, beside one queue.
//!   skiplock-bench flood [--seconds 15 --flooders 8]
//!       a good tenant's publish p99 beside wrong secrets of a real token id, then random token ids.
//!   skiplock-bench cluster-rate [--rate 2000 --seconds 15]
//!       W11 cluster-wide rate: an account on a plan of N msg/s publishing through one node, then two.
//!   skiplock-bench sizes [--seconds 10]
//!       W13 message sizes: W1 and W2 with 1 MiB bodies beside 1 KiB ones, messages/s and MB/s.
//!   skiplock-bench delete-under-fire [--queues 100 --per-queue 1000 --rate 1000]
//!       W12: an account deleted while a neighbour publishes through another node; the working node killed.
//!   skiplock-bench chaos [--mode pull|webhook|ordered|fan-out|schedules] [--seconds 20] ...
//!       the crash suite, on a PostgreSQL cluster of its own.
//!   skiplock-bench ha --nodes URL,... --account ID --token T --ready-file F --stop-file F
//!       the load and checker of the high-availability test (scripts/ha/run.sh, make ha-test).
//!   skiplock-bench long-poll [--only w7,idle]
//!       W7 publish -> long-poll receive latency, and the CPU that 1,000 idle waiting pulls cost.
//!   skiplock-bench horizon [--before-minutes 3 --held-minutes 10 --after-minutes 3] [--rate 1000] ...
//!       W10 held horizon: W4 beside minutely W1 + W2 cycles, before, during and after a snapshot held
//!       open by another connection (make bench-horizon).
//!   skiplock-bench soak [--minutes 60] [--kill-every-secs 300] ...
//!       an hour of mixed load over 100 accounts on two nodes, a node SIGKILLed every 5 minutes, PostgreSQL
//!       restarted once, a snapshot held 10 minutes; per-minute figures and verdicts (make soak).
//!   skiplock-bench flow [--keys 1000 --parallelism 2 --rate 20 --seconds 15]
//!       flow control's accuracy: the most of one key in flight, each key's rate, pull and webhook, two nodes.
//!   skiplock-bench suite [--quick] [--only w1,w2,...]
//!       W1-W5 beside the raw SQL ceiling, pgmq and RabbitMQ, W2o (W2f) and ordered delivery's fairness
//!       (make bench, make bench-quick).
//!
//! DATABASE_URL must name a server where the bench may create (and then drops) its own database;
//! `make latency` passes the private cluster's. The skiplock binary is the one beside this one.

mod api_load;
mod chaos;
mod chaos_fan_out;
mod chaos_schedules;
mod cluster_rate;
mod cpu;
mod dead_receiver;
mod delete_under_fire;
mod fairness;
mod fan_out;
mod first_delivery;
mod flood;
mod flow;
mod ha;
mod horizon;
mod http;
mod idle;
mod latency;
mod long_poll;
mod neighbour;
mod peers;
mod rabbitmq;
mod schedules;
mod setup;
mod sizes;
mod soak;
mod spread;
mod suite;
mod usage_export;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "skiplock-bench", about = "Measure skiplock: throughput and latency workloads")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Publish -> webhook latency at max_wait_time_ms = 0, at a fixed rate.
    Latency {
        /// Messages published per second (one message per request).
        #[arg(long, default_value_t = 1000)]
        rate: u32,
        /// How long to publish.
        #[arg(long, default_value_t = 20)]
        seconds: u32,
        /// W6 latency: idle accounts present, each with 10 webhook consumers and 10 pull queues.
        #[arg(long, default_value_t = 0)]
        idle_accounts: usize,
        /// W6 busy database: messages waiting in another queue, beside the dead rows of a drain.
        #[arg(long, default_value_t = 0)]
        backlog: u64,
    },
    /// W6 first delivery: create a webhook consumer and publish at once, `tries` times (the first a warm-up).
    FirstDelivery {
        #[arg(long, default_value_t = 21)]
        tries: usize,
    },
    /// W6 idle: webhook consumers and pull queues over many accounts, no traffic; CPU over a window.
    Idle(idle::IdleArgs),
    /// W7 publish -> long-poll receive latency, and the CPU of 1,000 idle waiting pulls.
    LongPoll(long_poll::LongPollArgs),
    /// W6 noisy neighbour: a quiet account's publish and pull p99, alone and beside a busy account.
    Neighbour(neighbour::NeighbourArgs),
    /// W6 spread: W1 and W2 over 1,000 queues in 100 accounts, beside one queue.
    Spread(spread::SpreadArgs),
    /// Wrong-token floods: a good tenant's publish p99 beside them, and the node's memory.
    Flood(flood::FloodArgs),
    /// W10 held horizon: W4 and minutely W1 + W2 cycles before, during and after a held snapshot.
    Horizon(horizon::HorizonArgs),
    /// W11 cluster-wide rate: an account's plan rate through one node, then two.
    ClusterRate(cluster_rate::ClusterRateArgs),
    /// W13 message sizes: W1 and W2 with 1 MiB bodies beside 1 KiB ones.
    Sizes(sizes::SizesArgs),
    /// W12 delete under fire: an account deleted beside a publishing neighbour, the working node killed.
    DeleteUnderFire(delete_under_fire::DeleteUnderFireArgs),
    /// Schedules at scale: 10,000 firing every minute; tick to commit, and the CPU between ticks.
    Schedules(schedules::SchedulesArgs),
    /// Flow control at scale: 1,000 keys at parallelism 2 and 20 msg/s each, pull and webhook, two nodes.
    Flow(flow::FlowArgs),
    /// A dead receiver: 100,000 messages due for an endpoint that refuses connections, then comes back.
    DeadReceiver(dead_receiver::DeadReceiverArgs),
    /// The crash suite: load while the server is SIGKILLed and PostgreSQL restarted; checks the history.
    Chaos(chaos::ChaosArgs),
    /// The high-availability test's load and checker, against nodes that scripts/ha/run.sh starts.
    Ha(ha::HaArgs),
    /// The soak: mixed load for an hour through node kills, a PostgreSQL restart and a held snapshot.
    Soak(soak::SoakArgs),
    /// The operator's usage export: a month of generated usage for many accounts, as CSV; time and memory.
    UsageExport(usage_export::UsageExportArgs),
    /// W1-W3 and W5 side by side with the raw SQL ceiling and pgmq on a private cluster.
    Suite(suite::SuiteArgs),
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Latency { rate, seconds, idle_accounts, backlog } => {
            latency::run(rate, seconds, latency::Beside { idle_accounts, backlog }).await
        }
        Command::FirstDelivery { tries } => first_delivery::run(tries).await,
        Command::Idle(args) => idle::run(args).await,
        Command::LongPoll(args) => long_poll::run(args).await,
        Command::Neighbour(args) => neighbour::run(args).await,
        Command::Spread(args) => spread::run(args).await,
        Command::Flood(args) => flood::run(args).await,
        Command::UsageExport(args) => usage_export::run(args).await,
        Command::Horizon(args) => horizon::run(args).await,
        Command::ClusterRate(args) => cluster_rate::run(args).await,
        Command::Sizes(args) => sizes::run(args).await,
        Command::DeleteUnderFire(args) => delete_under_fire::run(args).await,
        Command::Schedules(args) => schedules::run(args).await,
        Command::Flow(args) => flow::run(args).await,
        Command::DeadReceiver(args) => dead_receiver::run(args).await,
        Command::Chaos(args) if args.mode == chaos::Mode::Schedules => chaos_schedules::run(args).await,
        Command::Chaos(args) if args.mode == chaos::Mode::FanOut => chaos_fan_out::run(args).await,
        Command::Chaos(args) => chaos::run(args).await,
        Command::Ha(args) => ha::run(args).await,
        Command::Soak(args) => soak::run(args).await,
        Command::Suite(args) => suite::run(args).await,
    }
}
