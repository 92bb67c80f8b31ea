//! skiplock: a multi-tenant message-queue service on PostgreSQL that speaks the Cloudflare Queues API.
#![forbid(unsafe_code)]

pub mod api;
pub mod auth;
pub mod cli;
pub mod config;
pub mod dispatch;
pub mod engine;
pub mod error;
pub mod ids;
pub mod metrics;
pub mod queue;
pub mod startup;
pub mod store;
pub mod telemetry;
pub mod testkit;
