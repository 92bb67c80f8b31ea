//! The `skiplock` command line: serve, migrate, and the operator's account, token and operator-token
//! commands.

use clap::{Parser, Subcommand};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::auth::operator::{issue_operator, parse_operator_scopes};
use crate::auth::Scope;
use crate::config::{Settings, SettingsArgs};
use crate::ids::TokenId;
use crate::startup::{self, Node, Role};
use crate::store::pool::MIGRATOR;
use crate::{store, telemetry};

#[derive(Parser)]
#[command(
    name = "skiplock",
    version,
    about = "A multi-tenant message-queue service on PostgreSQL that speaks the Cloudflare Queues API"
)]
pub struct Cli {
    /// Every setting is an option here and an environment variable (shown beside it).
    #[command(flatten)]
    settings: SettingsArgs,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the API and the dashboard on SKIPLOCK_BIND.
    Serve {
        /// Roles to run, comma-separated: `api` (the HTTP API and dashboard) and `dispatcher` (webhook
        /// delivery). Every role also runs the retention clean-up.
        #[arg(long, value_delimiter = ',', default_value = "api,dispatcher")]
        roles: Vec<Role>,
        /// Do not apply pending database migrations at start.
        #[arg(long)]
        no_migrate: bool,
    },
    /// Apply pending database migrations and exit.
    Migrate,
    /// Manage accounts (tenants).
    Account {
        #[command(subcommand)]
        command: AccountCommand,
    },
    /// Manage API tokens.
    Token {
        #[command(subcommand)]
        command: TokenCommand,
    },
    /// Manage the operator's tokens, which reach the operator API (SKIPLOCK_ADMIN_BIND) alone.
    Operator {
        #[command(subcommand)]
        command: OperatorCommand,
    },
    /// The key that seals webhook signing secrets at rest (SKIPLOCK_SECRET_KEY).
    Secrets {
        #[command(subcommand)]
        command: SecretsCommand,
    },
}

#[derive(Subcommand)]
enum SecretsCommand {
    /// Print a new random key, for SKIPLOCK_SECRET_KEY.
    NewKey,
    /// Seal every stored secret under SKIPLOCK_SECRET_KEY, opening those under SKIPLOCK_PREVIOUS_SECRET_KEYS;
    /// safe while nodes run (give them both keys first; docs/operations.md, "Secrets at rest").
    Rotate,
}

#[derive(Subcommand)]
enum OperatorCommand {
    /// Operator tokens.
    Token {
        #[command(subcommand)]
        command: OperatorTokenCommand,
    },
}

#[derive(Subcommand)]
enum OperatorTokenCommand {
    /// Create an operator token; prints {"token_id", "token"}.
    Create {
        #[arg(long)]
        name: String,
        /// Comma-separated: read, write.
        #[arg(long, value_delimiter = ',', default_value = "read,write")]
        scopes: Vec<String>,
    },
    /// Revoke an operator token by id.
    Revoke { token_id: String },
}

#[derive(Subcommand)]
enum AccountCommand {
    /// Create an account and a token with every scope; prints {"account_id", "token"}.
    Create {
        #[arg(long)]
        name: String,
    },
}

#[derive(Subcommand)]
enum TokenCommand {
    /// Create a token for an account; prints {"token_id", "token"}.
    Create {
        #[arg(long)]
        account: String,
        #[arg(long)]
        name: String,
        /// Comma-separated: queues_read, queues_write, tokens_write.
        #[arg(long, value_delimiter = ',', default_value = "queues_read,queues_write")]
        scopes: Vec<String>,
    },
    /// Revoke a token by id.
    Revoke { token_id: String },
}

async fn operator_token(pool: &sqlx::PgPool, command: OperatorTokenCommand) -> anyhow::Result<()> {
    match command {
        OperatorTokenCommand::Create { name, scopes } => {
            MIGRATOR.run(pool).await?;
            if name.trim().is_empty() || name.chars().count() > 120 || name.chars().any(char::is_control) {
                anyhow::bail!("--name: 1-120 characters, no control characters");
            }
            let scopes = parse_operator_scopes(&scopes).map_err(|e| anyhow::anyhow!("--scopes: {e}"))?;
            let (id, token) = issue_operator(pool, &name, &scopes).await?;
            println!("{}", json!({ "token_id": id, "token": token }));
        }
        OperatorTokenCommand::Revoke { token_id } => {
            let id: TokenId = token_id.parse().map_err(|e| anyhow::anyhow!("token id: {e}"))?;
            if !store::operators::revoke(pool, id).await? {
                anyhow::bail!("no active operator token {id}");
            }
            println!("{}", json!({ "revoked": id }));
        }
    }
    Ok(())
}

pub async fn run(cli: Cli) -> anyhow::Result<()> {
    let settings = Settings::from(cli.settings);
    telemetry::init(&settings.log_filter, settings.log_json);
    if let Command::Secrets { command: SecretsCommand::NewKey } = cli.command {
        println!("{}", crate::auth::sealing::Keyring::new_key());
        return Ok(());
    }
    let pool = store::pool::connect(&settings.database_url, settings.db_pool_size).await?;
    match cli.command {
        Command::Serve { roles, no_migrate } => {
            if !no_migrate {
                MIGRATOR.run(&pool).await?;
            }
            let stop = CancellationToken::new();
            startup::cancel_on_signals(stop.clone());
            let node = Node::start(&settings, &roles, pool, stop).await?;
            tracing::info!(address = %node.metrics_addr, "serving /metrics");
            node.wait().await;
            tracing::info!("stopped");
        }
        Command::Migrate => {
            MIGRATOR.run(&pool).await?;
            println!("migrations applied");
        }
        Command::Account { command: AccountCommand::Create { name } } => {
            MIGRATOR.run(&pool).await?;
            let account = store::accounts::create(&pool, &name, crate::queue::plan::DEFAULT_PLAN).await?;
            let (_, token) = crate::auth::issue(&pool, account, "operator", &Scope::ALL).await?;
            println!("{}", json!({ "account_id": account, "token": token }));
        }
        Command::Token { command: TokenCommand::Create { account, name, scopes } } => {
            let account = account.parse().map_err(|e| anyhow::anyhow!("--account: {e}"))?;
            if !store::accounts::exists(&pool, account).await? {
                anyhow::bail!("no account {account}");
            }
            let scopes = crate::auth::parse_scopes(&scopes).map_err(|e| anyhow::anyhow!("--scopes: {e}"))?;
            let (id, token) = crate::auth::issue(&pool, account, &name, &scopes).await?;
            println!("{}", json!({ "token_id": id, "token": token }));
        }
        Command::Token { command: TokenCommand::Revoke { token_id } } => {
            let id: TokenId = token_id.parse().map_err(|e| anyhow::anyhow!("token id: {e}"))?;
            if !store::tokens::revoke_by_operator(&pool, id).await? {
                anyhow::bail!("no active token {id}");
            }
            println!("{}", json!({ "revoked": id }));
        }
        Command::Operator { command: OperatorCommand::Token { command } } => operator_token(&pool, command).await?,
        // Answered before connecting, above.
        Command::Secrets { command: SecretsCommand::NewKey } => {}
        Command::Secrets { command: SecretsCommand::Rotate } => {
            let keys = settings.keyring()?;
            let key = keys.current_id().map(str::to_owned).ok_or_else(|| {
                anyhow::anyhow!("SKIPLOCK_SECRET_KEY is not set: it names the key to seal the secrets under")
            })?;
            let sealed =
                crate::engine::sealing::seal_at_rest(&pool, &keys, crate::engine::sealing::Reseal::All).await?;
            println!("{}", json!({ "key_id": key, "consumers": sealed.consumers, "lease_key": sealed.lease_key }));
        }
    }
    Ok(())
}
