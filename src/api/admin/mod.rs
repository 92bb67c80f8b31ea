//! The operator API (`/admin/v1`), served on its own address (`SKIPLOCK_ADMIN_BIND`, loopback by
//! default) so that exposing the tenant API never exposes it, and reached by operator tokens alone.

pub mod accounts;
pub mod extract;
pub mod plans;
pub mod tokens;
