//! Serve a scenario until Ctrl-C: `cargo run -p ldb-sim --example serve -- [ENGINE] [SCENARIO] [PORT]`
//! (defaults: the scenario's engine, `quickstart`, 8000). The real entry point is
//! `llm-decode-bench sim`.

use std::net::SocketAddr;

use ldb_sim::{Personality, Scenario, SimServer};

#[tokio::main]
async fn main() {
    if let Err(e) = run().await {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

async fn run() -> Result<(), ldb_sim::SimError> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let engine = match args.first().map(String::as_str) {
        None | Some("-") => None,
        Some(e) => Some(e.parse::<Personality>()?),
    };
    let scenario = Scenario::load(args.get(1).map_or("quickstart", String::as_str))?;
    let port: u16 = args.get(2).and_then(|p| p.parse().ok()).unwrap_or(8000);
    let sim = SimServer::start(scenario, engine, SocketAddr::from(([127, 0, 0, 1], port))).await?;
    eprintln!(
        "simulating {} ({}) at {}; Ctrl-C to stop",
        sim.scenario().name,
        sim.personality(),
        sim.base_url()
    );
    let _ = tokio::signal::ctrl_c().await;
    let s = sim.stats();
    eprintln!(
        "served {} requests, {} tokens in {} steps",
        s.engine.submitted, s.engine.generated_tokens, s.engine.engine_steps
    );
    sim.shutdown().await;
    Ok(())
}
