//! Integration tests: each runs the real HTTP app against its own fresh PostgreSQL database.

mod helpers;
mod limits;
mod process;

mod auth;
mod cf_schema;
mod clients;
mod consumers;
mod counts;
mod dashboard;
mod dispatch_wakeups;
mod durability;
mod extend;
mod first_run;
mod idempotency;
mod long_poll;
mod messages_ack;
mod messages_publish;
mod messages_pull;
mod metrics;
mod operations;
mod parity;
mod peek_purge;
mod pull_acks;
mod queues;
mod read_only;
mod receiver;
mod redrive;
mod retention;
mod schemathesis;
mod sdk;
mod statements;
mod stats;
mod tenancy;
mod webhook_loop;
mod webhooks;
