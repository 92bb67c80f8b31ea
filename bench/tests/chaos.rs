//! The short crash suite (`make chaos` runs the long one), in each mode (pull, webhook, ordered keys, fan-out):
//! load while the server is SIGKILLed at random and PostgreSQL restarted in immediate mode; the checker
//! asserts over every client's history.

async fn chaos(mode: &str) {
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_skiplock-bench"))
        .args(["chaos", "--mode", mode, "--seconds", "10", "--kill-every-ms", "2000", "--pg-restart-every", "3"])
        .output()
        .await
        .expect("the bench binary runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stdout}");
    assert!(output.status.success(), "the chaos checker failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("| result |"), "{stdout}");
}

#[tokio::test]
async fn pull_consumers_lose_nothing_while_the_server_and_postgresql_crash() {
    chaos("pull").await;
}

#[tokio::test]
async fn webhook_deliveries_lose_nothing_through_receiver_faults_and_crashes() {
    chaos("webhook").await;
}

#[tokio::test]
async fn ordered_keys_keep_their_order_and_one_lease_each_while_the_server_and_postgresql_crash() {
    chaos("ordered").await;
}

#[tokio::test]
async fn fan_out_consumers_each_lose_nothing_while_the_server_and_postgresql_crash() {
    chaos("fan-out").await;
}
