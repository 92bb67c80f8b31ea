use clap::Parser;

// glibc's allocator keeps freed request buffers of many concurrent connections; mimalloc returns them.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() {
    let cli = skiplock::cli::Cli::parse();
    if let Err(err) = skiplock::cli::run(cli).await {
        eprintln!("skiplock: {err:#}");
        std::process::exit(1);
    }
}
