//! Issue 28 end to end: shell completion, `--config` errors, `--metrics-listen`
//! scraped during a short `--sim` run and parsed with a standard Prometheus
//! text parser, and `rerun` of that run's file giving the same settings.

mod common;

use std::io::{Read, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use common::{bin, free_port, run, text, tmp};
use serde_json::Value;

#[test]
fn bash_completion_offers_concurrency_after_conc() {
    let (_dir, script) = tmp("ldb.bash");
    let o = run(&["completions", "bash"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    std::fs::write(&script, &o.stdout).expect("write script");
    // the completion function as bash itself would call it on <TAB>
    let probe = format!(
        "source '{}'; COMP_WORDS=(llm-decode-bench --conc); COMP_CWORD=1; \
         COMP_LINE='llm-decode-bench --conc'; COMP_POINT=${{#COMP_LINE}}; \
         f=$(complete -p llm-decode-bench | sed 's/.*-F \\([^ ]*\\).*/\\1/'); \
         \"$f\" llm-decode-bench --conc llm-decode-bench; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        script.display()
    );
    let o = std::process::Command::new("bash")
        .args(["--norc", "--noprofile", "-c", &probe])
        .output()
        .expect("bash runs");
    let offered = text(&o.stdout);
    assert_eq!(
        offered.trim(),
        "--concurrency",
        "stderr: {}",
        text(&o.stderr)
    );
    for shell in ["zsh", "fish", "powershell"] {
        let o = run(&["completions", shell]);
        assert!(o.status.success() && o.stdout.len() > 1000, "{shell}");
    }
}

#[test]
fn a_bad_config_file_is_one_line_with_file_and_line_and_exit_2() {
    let (dir, file) = tmp("run.toml");
    std::fs::write(&file, "max-tokens = 64\n# comment\nconcurency = \"1\"\n").expect("write");
    let o = run(&[
        "--config",
        file.to_str().expect("utf-8"),
        "--output",
        &dir.path().join("r.json").display().to_string(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    let err = text(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(&format!("{}:3: unknown key \"concurency\"", file.display())),
        "{err}"
    );
    let o = run(&["--config", "/nonexistent/ldb.toml", "--print-config"]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(text(&o.stderr).lines().count(), 1);
}

/// One HTTP/1.0 GET of the page, or `None` while nothing listens.
fn scrape(port: u16) -> Option<String> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        .ok()?;
    let mut page = String::new();
    s.read_to_string(&mut page).ok()?;
    let (head, body) = page.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.0 200")
        .then(|| body.to_string())
        .or_else(|| head.starts_with("HTTP/1.1 200").then(|| body.to_string()))
}

fn gauge(page: &prometheus_parse::Scrape, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    page.samples
        .iter()
        .find(|s| s.metric == name && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .and_then(|s| match s.value {
            prometheus_parse::Value::Gauge(v) | prometheus_parse::Value::Untyped(v) => Some(v),
            _ => None,
        })
}

fn parse(page: &str) -> prometheus_parse::Scrape {
    let lines = page.lines().map(|l| Ok(l.to_string()));
    prometheus_parse::Scrape::parse(lines).expect("a Prometheus text page")
}

const RUN: &[&str] = &[
    "--sim",
    "--concurrency",
    "1,2",
    "--contexts",
    "0",
    "--max-tokens",
    "64",
    "--duration",
    "1",
    "--decode-warmup-seconds",
    "0",
    "--skip-prefill",
    "--display-mode",
    "plain",
];

fn doc(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("result")).expect("json")
}

#[test]
fn live_metrics_match_the_result_and_rerun_repeats_the_settings() {
    let (dir, out) = tmp("first.json");
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let mut args: Vec<&str> = RUN.to_vec();
    args.extend([
        "--metrics-listen",
        &listen,
        "--output",
        out.to_str().expect("utf-8"),
    ]);
    let child = bin()
        .args(&args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("runs");
    // scrape until the run ends; keep every page
    let (mut pages, started) = (Vec::new(), Instant::now());
    let mut child = child;
    while child.try_wait().expect("wait").is_none() && started.elapsed() < Duration::from_secs(120)
    {
        if let Some(p) = scrape(port) {
            pages.push(parse(&p));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let o = child.wait_with_output().expect("ends");
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(!pages.is_empty(), "no page was scraped");
    let first = doc(&out);
    // metadata.config is in the schema
    common::assert_valid(&first);
    let c1 = first["results"]
        .as_array()
        .and_then(|r| r.iter().find(|c| c["concurrency"] == 1))
        .expect("C=1 cell");
    let tps = c1["aggregate_tps"].as_f64().expect("C=1 measured");
    let seen = pages
        .iter()
        .rev()
        .filter_map(|p| {
            gauge(
                p,
                "ldb_cell_tokens_per_second",
                &[("concurrency", "1"), ("context", "0")],
            )
        })
        .next()
        .expect("a page after the C=1 cell finished");
    assert!(
        (seen - tps).abs() <= 0.01 * tps + 0.01,
        "page {seen} vs result {tps}"
    );
    let engine = first["metadata"]["engine"].as_str().expect("engine");
    // the page names the engine as the dashboard does (e.g. `vLLM` for `vllm`)
    assert!(
        pages
            .iter()
            .flat_map(|p| &p.samples)
            .any(|s| s.metric == "ldb_info"
                && s.labels
                    .get("engine")
                    .is_some_and(|e| e.eq_ignore_ascii_case(engine))),
        "no ldb_info naming {engine}"
    );
    assert!(
        pages.iter().any(
            |p| gauge(p, "ldb_cell_concurrency", &[]).unwrap_or(0.0) >= 1.0
                && gauge(p, "ldb_requests_in_flight", &[]).is_some()
                && gauge(p, "ldb_event_loop_lag_seconds", &[]).is_some()
        ),
        "no page during a cell"
    );
    assert!(
        pages.iter().any(
            |p| gauge(p, "ldb_client_cpu_share", &[]).is_some_and(|v| (0.0..=1.0).contains(&v))
        )
    );
    // the recorded configuration, then the same run again from the file
    let config = &first["metadata"]["config"];
    assert_eq!(config["max-tokens"], 64);
    assert_eq!(config["concurrency"], "1,2");
    assert!(config.get("api-key").is_none());
    let o = run(&[
        "rerun",
        out.to_str().expect("utf-8"),
        "--display-mode",
        "plain",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let again = doc(&dir.path().join("first-rerun.json"));
    let (a, b) = (&first["metadata"], &again["metadata"]);
    for key in [
        "concurrency_levels",
        "context_lengths",
        "max_tokens",
        "duration_per_test",
        "decode_warmup_seconds",
        "prefill_mode",
        "request_count",
        "sim_scenario",
        "engine",
        "model",
        "ignore_eos",
        "max_error_rate",
    ] {
        assert_eq!(a[key], b[key], "metadata.{key}");
    }
    let strip = |v: &Value| {
        let mut m = v.as_object().expect("config").clone();
        m.remove("output");
        m.remove("metrics-listen");
        m
    };
    assert_eq!(strip(&a["config"]), strip(&b["config"]));
    let cells = |d: &Value| -> Vec<(Value, Value)> {
        d["results"]
            .as_array()
            .expect("cells")
            .iter()
            .map(|c| (c["concurrency"].clone(), c["context_tokens"].clone()))
            .collect()
    };
    assert_eq!(cells(&first), cells(&again));
}

#[test]
fn rerun_refuses_what_is_not_a_result_with_exit_2() {
    let (dir, f) = tmp("x.json");
    std::fs::write(&f, "{\"a\": 1}").expect("write");
    let o = run(&["rerun", f.to_str().expect("utf-8")]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(text(&o.stderr).lines().count(), 1, "{}", text(&o.stderr));
    let old = dir.path().join("old.json");
    std::fs::write(
        &old,
        "{\"metadata\": {\"version\": \"0.0.1\", \"schema_version\": 1}, \"results\": []}",
    )
    .expect("write");
    let o = run(&["rerun", old.to_str().expect("utf-8")]);
    assert_eq!(o.status.code(), Some(2));
    let err = text(&o.stderr);
    assert!(err.contains("records no configuration"), "{err}");
}

#[test]
fn metrics_listen_on_a_port_in_use_is_exit_2_before_anything_is_sent() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = taken.local_addr().expect("addr").to_string();
    let (_dir, out) = tmp("never.json");
    let mut args: Vec<&str> = RUN.to_vec();
    args.extend([
        "--metrics-listen",
        &addr,
        "--output",
        out.to_str().expect("utf-8"),
    ]);
    let o = run(&args);
    assert_eq!(o.status.code(), Some(2));
    let err = text(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("--metrics-listen") && err.contains(&addr),
        "{err}"
    );
    assert!(!out.exists());
}

#[test]
fn print_config_shows_the_presets_and_no_key() {
    let o = bin()
        .args(["--sim", "--max-tok", "64", "--print-config"])
        .env("LLM_BENCH_API_KEY", "sk-do-not-print")
        .output()
        .expect("runs");
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let page = text(&o.stdout);
    for line in [
        "concurrency = \"1,4,16\"",
        "max-tokens = 64",
        "sim = \"quickstart\"",
    ] {
        assert!(page.lines().any(|l| l == line), "{line} not in\n{page}");
    }
    assert!(
        !page.contains("sk-do-not-print") && !page.contains("api-key"),
        "{page}"
    );
}
