//! `llm-decode-bench`: a thin front end over the library crates.
//!
//! Parses flags, lowers them once into an [`invocation::Invocation`]
//! (every cross-flag check), runs it, and turns the outcome into an exit
//! code (documented in `--help` and the README).

mod address;
mod app;
mod bench;
mod cjk_watchdog;
mod cli;
mod cli_cstats;
mod cli_energy;
mod cli_fabric;
mod cli_float;
mod cli_mixed;
mod cli_prefix;
mod cli_shard;
mod cli_tools;
mod cli_workload;
mod coding_peak;
mod compare;
mod config;
mod config_error;
mod config_file;
mod convert_trace;
mod cstats;
mod cstats_config;
mod deploy;
mod effective;
mod error;
mod fabric;
mod fabric_config;
mod fdlimit;
#[cfg(test)]
mod flag_fuzz;
mod invocation;
mod merge;
mod metrics_listen;
mod paired;
mod report;
mod rerun;
mod rerun_policy;
mod selftest;
mod session;
mod shard;
mod stop_signals;
mod target;
mod tools;
mod workload_config;

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
    let invocation = match invocation::Invocation::lower(cli, argv) {
        Ok(i) => i,
        Err(e) => std::process::exit(error::exit_with(Err(e))),
    };
    // The commands that print a text need no runtime.
    match invocation {
        invocation::Invocation::Completions(shell) => std::process::exit(tools::completions(shell)),
        invocation::Invocation::Man => std::process::exit(tools::man()),
        invocation::Invocation::Deploy(ref a) => std::process::exit(deploy::run(a)),
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
    let code = runtime.block_on(invocation.execute());
    runtime.shutdown_timeout(std::time::Duration::from_secs(2));
    std::process::exit(code);
}
