//! `llm-decode-bench cjk-watchdog`: stream chat completions and watch the
//! text for Han ideographs (a model drifting into Chinese).
//!
//! Each iteration sends the prompt (after an optional synthetic document),
//! echoes the streamed reasoning and answer, and counts Han ideographs with
//! `ldb_core::cjk`. With `--loop` it repeats until one appears, closing that
//! stream at once. Requests go through `ldb-client` like the benchmark's.
//! Exit codes: `cli::CJK_EXIT_CODES` (docs/cjk-watchdog.md).

mod overlay;

use std::io::{IsTerminal, Write};

use bytes::Bytes;
use ldb_client::Http;
use ldb_client::text_stream::{Flow, TextOutcome, stream_text};
use ldb_core::cjk::count_han;
use ldb_core::prompt::Message;

use crate::cli::CjkWatchdogArgs;
use crate::error::{AppError, exit, exit_with};
use overlay::Overlay;

/// Characters per token of the synthetic document (as the reference).
const CHARS_PER_TOKEN: u64 = 4;

/// Exit code when a Han ideograph was streamed (shared with bad command
/// lines, as in the reference script).
const HAN_FOUND: i32 = 2;

/// A bad command line as one line on stderr: clap's first line (the
/// problem) without the usage block after it.
pub fn print_flag_error(e: &clap::Error) {
    let text = e.render().to_string();
    let first = text.lines().next().unwrap_or("error: bad command line");
    eprintln!("{first} (see llm-decode-bench cjk-watchdog --help)");
}

/// The subcommand.
pub async fn run(a: CjkWatchdogArgs) -> i32 {
    exit_with(watch(a).await)
}

/// One iteration's numbers.
#[derive(Debug, Default, Clone, Copy)]
struct Iteration {
    n: u64,
    tokens: Option<u64>,
    ttft: Option<f64>,
    total: f64,
    han: u64,
}

impl Iteration {
    fn rate_total(&self) -> Option<f64> {
        self.tokens
            .filter(|_| self.total > 0.0)
            .map(|t| t as f64 / self.total)
    }

    fn rate_generation(&self) -> Option<f64> {
        let gen_time = self.total - self.ttft?;
        self.tokens
            .filter(|_| gen_time > 0.0)
            .map(|t| t as f64 / gen_time)
    }
}

/// Totals over the iterations so far.
#[derive(Debug, Default)]
struct Totals {
    iterations: u64,
    tokens: u64,
    total_rates: Vec<f64>,
    gen_rates: Vec<f64>,
    han: u64,
    last: Option<Iteration>,
}

impl Totals {
    fn add(&mut self, it: Iteration) {
        self.iterations += 1;
        self.tokens += it.tokens.unwrap_or(0);
        self.total_rates.extend(it.rate_total());
        self.gen_rates.extend(it.rate_generation());
        self.han += it.han;
        self.last = Some(it);
    }

    fn stats_row(&self) -> String {
        let last = self.last.map_or_else(
            || "● last: —".to_string(),
            |l| {
                format!(
                    "● last #{}: {} tok @ {} tok/s │ TTFT {}",
                    l.n,
                    l.tokens.map_or("?".into(), |t| t.to_string()),
                    fmt_rate(l.rate_generation()),
                    l.ttft.map_or("—".into(), |t| format!("{t:.2} s"))
                )
            },
        );
        format!(
            "{last}   Σ {}× │ {} tok │ avg {} tok/s   CJK: {}",
            self.iterations,
            self.tokens,
            fmt_rate(mean(&self.gen_rates)),
            self.han
        )
    }
}

fn mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

fn fmt_rate(r: Option<f64>) -> String {
    r.map_or_else(|| "—".to_string(), |r| format!("{r:.1}"))
}

/// Why the watch ended.
enum End {
    /// One clean iteration without `--loop`.
    Clean,
    /// A Han ideograph in iteration n.
    Han(u64),
    /// The request failed (message printed).
    Failed,
    /// Ctrl-C.
    Interrupted,
}

async fn watch(a: CjkWatchdogArgs) -> Result<i32, AppError> {
    let (base, _) = crate::config::server_address(&a.host, Some(a.port))
        .map_err(|crate::config::ConfigError(e)| AppError::Config(e))?;
    // The address requests go to, without any credentials a URL may hold.
    let label = ldb_core::redact::redact_url(&base);
    let key = Some(a.api_key.clone()).filter(|k| !k.is_empty());
    let http = Http::new(&base, key, 1).map_err(|e| AppError::Server(e.to_string()))?;
    let model = if a.model.is_empty() {
        ldb_client::discovery::discover(&http, None)
            .await
            .map_err(|e| AppError::Server(e.to_string()))?
            .model
    } else {
        a.model.clone()
    };
    let messages = build_messages(&a);
    println!(
        "[INFO] server {label}, model {model}, max_tokens {}",
        a.max_tokens
    );
    if a.context_tokens > 0 {
        let chars = a.context_tokens * CHARS_PER_TOKEN;
        println!(
            "[INFO] synthetic document: ~{} tokens ({chars} characters)",
            a.context_tokens
        );
    }
    let body = ldb_core::coding_peak::chat_request(&model, &messages, a.max_tokens, None);
    let body = Bytes::from(serde_json::to_vec(&body).unwrap_or_default());
    let color = std::io::stdout().is_terminal();
    let mut overlay = if color && !a.no_overlay {
        crossterm::terminal::size()
            .ok()
            .and_then(|(_, rows)| Overlay::start(rows))
    } else {
        None
    };
    let mut totals = Totals::default();
    let end = crate::stop_signals::until_stopped(iterations(
        &a,
        &http,
        &body,
        color,
        &mut overlay,
        &mut totals,
    ))
    .await
    .unwrap_or(End::Interrupted);
    drop(overlay);
    println!();
    let code = match end {
        End::Clean => exit::OK,
        End::Han(_) => HAN_FOUND,
        End::Failed => exit::SERVER,
        End::Interrupted => exit::INTERRUPTED,
    };
    if a.repeat || matches!(end, End::Interrupted) {
        print_summary(&totals, &end);
    }
    Ok(code)
}

/// The messages: the prompt alone, or after a synthetic document of about
/// `--context-tokens` tokens in the benchmark's framing.
fn build_messages(a: &CjkWatchdogArgs) -> Vec<Message> {
    let chars = usize::try_from(a.context_tokens.saturating_mul(CHARS_PER_TOKEN)).unwrap_or(0);
    if chars == 0 {
        return vec![Message {
            role: "user",
            content: a.prompt.clone(),
            tool: None,
        }];
    }
    let nonce = ldb_core::prompt::nonce("cjk", "watchdog");
    let mut m = ldb_core::prompt::messages(&nonce, chars);
    if let Some(last) = m.last_mut() {
        last.content.clone_from(&a.prompt);
    }
    m
}

async fn iterations(
    a: &CjkWatchdogArgs,
    http: &Http,
    body: &Bytes,
    color: bool,
    overlay: &mut Option<Overlay>,
    totals: &mut Totals,
) -> End {
    let mut n = 0;
    loop {
        n += 1;
        println!("[INFO] === Iteration #{n} ===");
        if let Some(o) = overlay.as_mut() {
            o.stats(totals.stats_row());
        }
        let out = one(a, http, body, n, color, overlay).await;
        println!();
        if let Some(e) = &out.error {
            println!("{}", paint(&format!("[ERR] {e}"), "1;31", color));
            return End::Failed;
        }
        let it = Iteration {
            n,
            tokens: out.completion_tokens,
            ttft: out.first_token,
            total: out.end,
            han: count_han(&out.reasoning) + count_han(&out.content),
        };
        totals.add(it);
        if let Some(o) = overlay.as_mut() {
            o.stats(totals.stats_row());
        }
        print_iteration(&it, out.stopped, color);
        if it.han > 0 {
            return End::Han(n);
        }
        if !a.repeat {
            return End::Clean;
        }
    }
}

/// One request, echoed as it streams; with `--loop`, closed at the first Han
/// ideograph.
async fn one(
    a: &CjkWatchdogArgs,
    http: &Http,
    body: &Bytes,
    n: u64,
    color: bool,
    overlay: &mut Option<Overlay>,
) -> TextOutcome {
    let mut chunks = 0u64;
    let mut han = 0u64;
    let mut first: Option<f64> = None;
    let on_text = |ev: &ldb_client::text_stream::TextEvent<'_>| {
        chunks += 1;
        first.get_or_insert(ev.t);
        let mut out = std::io::stdout().lock();
        if !ev.reasoning.is_empty() {
            let _ = write!(out, "{}", paint(ev.reasoning, "2", color));
        }
        let _ = write!(out, "{}", ev.content);
        let _ = out.flush();
        drop(out);
        let found = count_han(ev.reasoning) + count_han(ev.content);
        han += found;
        if let Some(o) = overlay.as_mut() {
            o.live(live_row(n, ev, chunks, first, han), found > 0);
        }
        if a.repeat && found > 0 {
            Flow::Stop
        } else {
            Flow::Continue
        }
    };
    // No first-token limit: a long prefill of a big document may take a while,
    // and Ctrl-C ends the wait.
    stream_text(http, "/v1/chat/completions", body.clone(), None, on_text).await
}

/// `▶ iter n │ x tok/s │ tok n │ t s │ CJK n` (chunk rate without usage).
fn live_row(
    n: u64,
    ev: &ldb_client::text_stream::TextEvent<'_>,
    chunks: u64,
    first: Option<f64>,
    han: u64,
) -> String {
    let since_first = first.map_or(0.0, |f| ev.t - f);
    let rate = match ev.completion_tokens {
        Some(tok) if since_first > 0.0 => {
            format!("{:.1} tok/s │ tok {tok}", tok as f64 / since_first)
        }
        Some(tok) => format!("— tok/s │ tok {tok}"),
        None if since_first > 0.0 => format!("{:.1} chunks/s", chunks as f64 / since_first),
        None => "— chunks/s".to_string(),
    };
    format!("▶ iter {n} │ {rate} │ {:.1} s │ CJK {han}", ev.t)
}

fn print_iteration(it: &Iteration, stopped: bool, color: bool) {
    let ttft = it.ttft.map_or("—".into(), |t| format!("{t:.3} s"));
    println!("[INFO] TTFT {ttft} │ total {:.3} s", it.total);
    match it.tokens {
        Some(t) => println!(
            "[INFO] {t} completion tokens │ {} tok/s including TTFT │ {} tok/s generation",
            fmt_rate(it.rate_total()),
            fmt_rate(it.rate_generation())
        ),
        None => println!(
            "{}",
            paint(
                "[WARN] the server sent no usage: completion tokens and throughput unknown",
                "33",
                color
            )
        ),
    }
    if it.han > 0 {
        let early = if stopped {
            " (stream aborted early)"
        } else {
            ""
        };
        println!(
            "{}",
            paint(
                &format!(
                    "[CJK] {} Han ideograph(s) in iteration #{}{early}",
                    it.han, it.n
                ),
                "1;37;41",
                color
            )
        );
    } else {
        println!("[INFO] CJK: 0 Han ideographs");
    }
}

fn print_summary(t: &Totals, end: &End) {
    let reason = match end {
        End::Clean => "finished".to_string(),
        End::Han(n) => format!("Han ideograph in iteration #{n}"),
        End::Failed => "request failed".to_string(),
        End::Interrupted => "interrupted (Ctrl-C or a stop signal)".to_string(),
    };
    println!(
        "[INFO] Summary: {} iteration(s), {} completion tokens, {} tok/s including TTFT, {} \
         tok/s generation (averages), {} Han ideograph(s); stopped: {reason}",
        t.iterations,
        t.tokens,
        fmt_rate(mean(&t.total_rates)),
        fmt_rate(mean(&t.gen_rates)),
        t.han
    );
}

fn paint(text: &str, sgr: &str, color: bool) -> String {
    if color {
        format!("\x1b[{sgr}m{text}\x1b[0m")
    } else {
        text.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_leave_out_what_is_unknown() {
        let it = Iteration {
            n: 1,
            tokens: Some(100),
            ttft: Some(0.5),
            total: 2.5,
            han: 0,
        };
        assert_eq!(it.rate_total(), Some(40.0));
        assert_eq!(it.rate_generation(), Some(50.0));
        let no_usage = Iteration { tokens: None, ..it };
        assert_eq!(no_usage.rate_generation(), None);
        let mut t = Totals::default();
        t.add(it);
        t.add(no_usage);
        assert_eq!((t.iterations, t.tokens), (2, 100));
        assert!(t.stats_row().contains("Σ 2×"), "{}", t.stats_row());
    }
}
