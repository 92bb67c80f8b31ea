use clap::Parser;

#[tokio::main]
async fn main() {
    let cli = skiplock::cli::Cli::parse();
    if let Err(err) = skiplock::cli::run(cli).await {
        eprintln!("skiplock: {err:#}");
        std::process::exit(1);
    }
}
