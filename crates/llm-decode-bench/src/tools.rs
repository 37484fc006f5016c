//! `completions SHELL` and `man`: generated from the clap definitions of
//! `cli.rs`, so every flag (those other modules add included) is in them
//! and they never drift from `--help`.

use std::io::Write;

use clap::CommandFactory;

use crate::cli::Cli;
use crate::error::exit;

/// The completion script of `shell` on stdout.
pub fn completions(shell: clap_complete::Shell) -> i32 {
    let mut cmd = Cli::command();
    let mut out = std::io::stdout().lock();
    clap_complete::generate(shell, &mut cmd, "llm-decode-bench", &mut out);
    finish(out.flush())
}

/// The man page (roff), subcommands included, on stdout.
pub fn man() -> i32 {
    let mut out = std::io::stdout().lock();
    let r = man_page(&mut out).and_then(|()| out.flush());
    finish(r)
}

/// The man page of the command and a section per subcommand.
pub fn man_page(out: &mut dyn Write) -> std::io::Result<()> {
    let cmd = Cli::command();
    clap_mangen::Man::new(cmd.clone()).render(out)?;
    for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
        let name = format!("llm-decode-bench-{}", sub.get_name());
        let sub = sub.clone().bin_name(name);
        writeln!(out)?;
        let man = clap_mangen::Man::new(sub);
        man.render_title(out)?;
        man.render_name_section(out)?;
        man.render_synopsis_section(out)?;
        man.render_description_section(out)?;
        man.render_options_section(out)?;
    }
    Ok(())
}

fn finish(r: std::io::Result<()>) -> i32 {
    match r {
        Ok(()) => exit::OK,
        // a closed pipe (`| head`) is not a failure of ours
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => exit::OK,
        Err(e) => {
            eprintln!("error: cannot write to stdout: {e}");
            exit::OUTPUT
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_man_page_lists_every_flag() {
        let mut page = Vec::new();
        man_page(&mut page).expect("renders");
        let page = String::from_utf8(page).expect("utf-8");
        let cmd = Cli::command();
        let subs = cmd.get_subcommands().cloned().collect::<Vec<_>>();
        for c in std::iter::once(&cmd).chain(&subs) {
            for arg in c.get_arguments().filter(|a| !a.is_hide_set()) {
                let Some(long) = arg.get_long() else { continue };
                // roff escapes the dashes: \-\-max\-tokens
                let roff = format!("\\-\\-{}", long.replace('-', "\\-"));
                assert!(
                    page.contains(&roff),
                    "--{long} of {} is not in the man page",
                    c.get_name()
                );
            }
        }
    }
}
