//! skiplock: a multi-tenant message-queue service on PostgreSQL that speaks the Cloudflare Queues API.
#![forbid(unsafe_code)]

pub mod activity;
pub mod api;
pub mod auth;
pub mod backlog;
pub mod cli;
pub mod config;
pub mod delivery;
pub mod dispatch;
pub mod error;
pub mod ids;
pub mod limits;
pub mod maintenance;
pub mod metrics;
pub mod publisher;
pub mod queue;
pub mod redrive;
pub mod startup;
pub mod state;
pub mod store;
pub mod telemetry;
pub mod testkit;
pub mod wakeups;
