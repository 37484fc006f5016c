//! `llm-decode-bench`: a thin front end over the library crates.
//!
//! Parses flags, hands over to `app`, and turns the outcome into an exit
//! code (documented in `--help` and the README).

mod address;
mod app;
mod cjk_watchdog;
mod cli;
mod cli_cstats;
mod cli_fabric;
mod cli_shard;
mod coding_peak;
mod compare;
mod config;
mod config_file;
mod cstats;
mod cstats_config;
mod effective;
mod error;
mod fabric;
mod fabric_config;
mod fdlimit;
mod merge;
mod metrics_listen;
mod paired;
mod report;
mod rerun;
mod selftest;
mod shard;
mod tools;

use clap::Parser;

fn main() {
    let argv: Vec<String> = std::env::args().collect();
    // `--config FILE`: its flags go before the command line's, which win.
    let argv = match config_file::expand(&argv) {
        Ok(a) => a,
        Err(message) => {
            eprintln!("error: {message}");
            std::process::exit(app::exit::CONFIG);
        }
    };
    let cli = match cli::Cli::try_parse_from(&argv) {
        Ok(c) => c,
        Err(e) => {
            // clap prints usage errors with its own formatting; help and
            // version are not errors.
            let code = if e.use_stderr() {
                app::exit::CONFIG
            } else {
                app::exit::OK
            };
            if e.use_stderr() && argv.get(1).is_some_and(|a| a == "cjk-watchdog") {
                // The watchdog's scripts read one line, as from the reference script.
                cjk_watchdog::print_flag_error(&e);
                std::process::exit(code);
            }
            let _ = e.print();
            std::process::exit(code);
        }
    };
    match &cli.command {
        Some(cli::Command::Completions(a)) => std::process::exit(tools::completions(a.shell)),
        Some(cli::Command::Man) => std::process::exit(tools::man()),
        _ => {}
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            std::process::exit(1);
        }
    };
    let code = runtime.block_on(async move {
        match cli.command {
            Some(cli::Command::Sim(a)) => app::serve_sim(a).await,
            Some(cli::Command::Compare(a)) => compare::run(&a),
            Some(cli::Command::Report(a)) => report::run(&a),
            Some(cli::Command::Merge(a)) => error::exit_with(merge::run(&a)),
            Some(cli::Command::Selftest(a)) => selftest::run(&a).await,
            Some(cli::Command::CjkWatchdog(a)) => cjk_watchdog::run(a).await,
            Some(cli::Command::Rerun(a)) => {
                rerun::run(a, argv.first().cloned().unwrap_or_default()).await
            }
            Some(cli::Command::Completions(_) | cli::Command::Man) => app::exit::OK,
            None => app::bench(cli.bench, argv).await,
        }
    });
    runtime.shutdown_timeout(std::time::Duration::from_secs(2));
    std::process::exit(code);
}
