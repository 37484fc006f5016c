//! Beyond one server process: `deploy k8s` / `deploy slurm`, the portable
//! binary check, and `--metrics-url` over replicas behind a router.
//!
//! `deploy k8s` and `deploy slurm` end to end: what they print is valid
//! (the Kubernetes API schema, `bash -n`) and carries the benchmark flags
//! unchanged all the way to the benchmark's own command line, checked by
//! running the printed container script and sbatch script with stand-ins
//! for the binary, `srun` and `scontrol`.
//!
//! The schema check runs `scripts/k8s-validate.sh` (PyPI's
//! kubernetes-validate, installed into the tool cache on first use). Where it
//! cannot be installed the test prints a notice and passes, except under
//! `CI`, where that is a failure.
//!
//! `--metrics-url`: two simulator processes behind a small round-robin TCP
//! router made by the test; the benchmark talks to the router and reads
//! both simulators' `/metrics`.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{run, text};
use serde_json::Value;

/// Flags that a careless shell quoting would change: spaces, quotes, `$`,
/// a backslash, an empty word.
fn tricky_flags() -> Vec<String> {
    [
        "--host",
        "http://router.svc:8000",
        "--concurrency",
        "64,128",
        "--model",
        "it's \"a\" model $HOME \\n",
        "--api-key-file",
        "",
        "--output",
        "fleet run.json",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// An executable shell script at `dir/name`.
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, format!("#!/bin/sh\n{body}")).expect("write script");
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    p
}

/// A stand-in `llm-decode-bench` that writes its arguments, one per line
/// with NUL ends, to `$ARGS_OUT`.
fn recording_binary(dir: &Path) {
    script(
        dir,
        "llm-decode-bench",
        "for a in \"$@\"; do printf '%s\\0' \"$a\"; done > \"$ARGS_OUT\"\n",
    );
}

fn recorded(file: &Path) -> Vec<String> {
    let raw = std::fs::read(file).expect("the stand-in binary ran");
    raw.split(|b| *b == 0)
        .map(|w| String::from_utf8_lossy(w).into_owned())
        .collect::<Vec<_>>()
        .split_last()
        .map(|(_, words)| words.to_vec())
        .unwrap_or_default()
}

fn path_with(dir: &Path) -> String {
    format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

#[test]
fn kubernetes_manifests_validate_and_carry_the_flags_unchanged() {
    let flags = tricky_flags();
    let mut args: Vec<String> = [
        "deploy",
        "k8s",
        "--shards",
        "4",
        "--image",
        "reg.example/ldb:0.1",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.push("--".into());
    args.extend(flags.iter().cloned());
    let out = run(&args);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let yaml = text(&out.stdout);
    assert!(!yaml.contains("LDB_SHARD_SECRET=") && yaml.contains("secretKeyRef"));

    // Parsed back: the Job's args are the flags, word for word.
    let docs: Vec<Value> = yaml
        .split("\n---\n")
        .skip(1)
        .map(|d| serde_yaml_ng::from_str(d).expect("YAML"))
        .collect();
    assert_eq!(docs.len(), 3, "{yaml}");
    assert_eq!(docs[0]["kind"], "Service");
    assert_eq!(docs[1]["kind"], "NetworkPolicy");
    let job = &docs[2];
    assert_eq!(job["kind"], "Job");
    let c = &job["spec"]["template"]["spec"]["containers"][0];
    let got: Vec<String> = serde_json::from_value(c["args"].clone()).expect("args");
    assert_eq!(got, flags);

    // The container's command run as the pod would run it (shard 0, the
    // result file present): the benchmark sees the shard flags, then the
    // flags unchanged, and the log gets the result between its markers.
    let dir = tempfile::tempdir().expect("tempdir");
    recording_binary(dir.path());
    std::fs::write(dir.path().join("fleet run.json"), "{\"ok\": 1}\n").expect("result");
    let command: Vec<String> = serde_json::from_value(c["command"].clone()).expect("command");
    let env = |name: &str| {
        c["env"]
            .as_array()
            .and_then(|e| e.iter().find(|v| v["name"] == name))
            .and_then(|v| v["value"].as_str())
            .unwrap_or_default()
            .to_string()
    };
    assert_eq!(env("LDB_RESULT_FILE"), "fleet run.json");
    let pod = Command::new(&command[0])
        .args(&command[1..])
        .args(&flags)
        .current_dir(dir.path())
        .env("PATH", path_with(dir.path()))
        .env("ARGS_OUT", dir.path().join("args"))
        .env("JOB_COMPLETION_INDEX", "0")
        .env("LDB_RESULT_FILE", env("LDB_RESULT_FILE"))
        .env("LDB_KEEP_SECONDS", "0")
        .output()
        .expect("sh runs");
    assert!(pod.status.success(), "{}", text(&pod.stderr));
    let mut want: Vec<String> = [
        "--shards",
        "4",
        "--coordinator",
        "llm-decode-bench-0.llm-decode-bench.default.svc.cluster.local:29517",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    want.extend(flags.iter().cloned());
    assert_eq!(recorded(&dir.path().join("args")), want);
    let log = text(&pod.stdout);
    assert!(
        log.contains("result fleet run.json begin ===\n{\"ok\": 1}\n"),
        "{log}"
    );

    // With a claim and an API key too (which becomes a Secret reference),
    // both printed sets validate against the API schema.
    let mut pvc = args.clone();
    pvc.splice(
        2..2,
        ["--output-volume".to_string(), "ldb-results".to_string()],
    );
    pvc.extend(["--api-key".to_string(), "sk-fleet-test".to_string()]);
    let out2 = run(&pvc);
    assert!(out2.status.success(), "{}", text(&out2.stderr));
    assert!(!text(&out2.stdout).contains("sk-fleet-test"));
    assert!(text(&out2.stdout).contains("secretKeyRef"));
    let file = dir.path().join("manifests.yaml");
    std::fs::write(&file, format!("{yaml}---\n{}", text(&out2.stdout))).expect("write");
    validate(&file);
}

/// `scripts/k8s-validate.sh FILE`: a failed validation fails the test; a
/// validator that cannot be installed fails it under CI only.
fn validate(file: &Path) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/k8s-validate.sh");
    let out = Command::new(script).arg(file).output().expect("bash runs");
    let (so, se) = (text(&out.stdout), text(&out.stderr));
    if out.status.success() {
        // Service, NetworkPolicy and Job, twice
        assert_eq!(so.matches("passed for resource").count(), 6, "{so}{se}");
        return;
    }
    let not_installed = se.contains("pip install") || se.contains("could not create a venv");
    if not_installed && std::env::var_os("CI").is_none() {
        eprintln!("notice: the Kubernetes schema check was skipped (no validator): {se}");
        return;
    }
    panic!("the manifests did not validate:\n{so}{se}");
}

#[test]
fn the_sbatch_script_parses_and_hands_each_task_the_flags_unchanged() {
    let flags = tricky_flags();
    let mut args: Vec<String> = [
        "deploy", "slurm", "--shards", "2", "--nodes", "2", "--time", "00:20:00",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.push("--".into());
    args.extend(flags.iter().cloned());
    let out = run(&args);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let dir = tempfile::tempdir().expect("tempdir");
    let sbatch = dir.path().join("job.sh");
    std::fs::write(&sbatch, &out.stdout).expect("write");
    let n = Command::new("bash")
        .arg("-n")
        .arg(&sbatch)
        .output()
        .expect("bash");
    assert!(n.status.success(), "bash -n: {}", text(&n.stderr));

    // Stand-ins: scontrol expands the node list, srun runs its command as
    // task 1 of the job (so the index is seen to come from SLURM_PROCID).
    recording_binary(dir.path());
    script(dir.path(), "scontrol", "printf 'node7\\nnode8\\n'\n");
    script(
        dir.path(),
        "srun",
        "while [ \"${1#--}\" != \"$1\" ]; do shift; done\nSLURM_PROCID=1 exec \"$@\"\n",
    );
    let job = |secret: Option<&str>| {
        let mut c = Command::new("bash");
        c.arg(&sbatch)
            .current_dir(dir.path())
            .env("PATH", path_with(dir.path()))
            .env("ARGS_OUT", dir.path().join("args"))
            .env("SLURM_JOB_NODELIST", "node[7-8]")
            .env_remove("LDB_SHARD_SECRET");
        if let Some(s) = secret {
            c.env("LDB_SHARD_SECRET", s);
        }
        c.output().expect("bash runs")
    };
    let ran = job(Some("s3cret"));
    assert!(ran.status.success(), "{}", text(&ran.stderr));
    let mut want: Vec<String> = [
        "--shards",
        "2",
        "--shard-index",
        "1",
        "--coordinator",
        "node7:29517",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    want.extend(flags.iter().cloned());
    assert_eq!(recorded(&dir.path().join("args")), want);

    // Without the secret the script stops before srun, naming the variable.
    let refused = job(None);
    assert!(!refused.status.success());
    assert!(text(&refused.stderr).contains("LDB_SHARD_SECRET"));
}

#[test]
fn shard_flags_among_the_benchmark_flags_are_bad_input() {
    let out = run(&[
        "deploy",
        "slurm",
        "--shards",
        "2",
        "--",
        "--shard-index",
        "1",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("deploy sets --shard-index itself"), "{err}");
}

/// `scripts/check-portable.sh` run on `bin`, with `readelf` from `path` first.
fn check_portable(bin: &Path, path: Option<&Path>) -> (i32, String) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/check-portable.sh");
    let mut c = Command::new(script);
    c.arg(bin);
    if let Some(dir) = path {
        c.env("PATH", path_with(dir));
    }
    let out = c.output().expect("bash runs");
    (
        out.status.code().unwrap_or(-1),
        text(&out.stdout) + &text(&out.stderr),
    )
}

#[test]
fn the_portability_check_passes_this_binary_and_fails_others() {
    let ours = Path::new(env!("CARGO_BIN_EXE_llm-decode-bench"));
    let (code, out) = check_portable(ours, None);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("needs libc.so.6 (allowed)"), "{out}");

    // A stand-in readelf replaying what it prints for a binary that links
    // zlib and needs glibc 2.38 (fixtures: no compiler or library needed).
    let dir = tempfile::tempdir().expect("tempdir");
    script(
        dir.path(),
        "readelf",
        "case \"$1\" in\n\
         -d) printf ' 0x1 (NEEDED)  Shared library: [libz.so.1]\\n 0x1 (NEEDED)  Shared library: [libc.so.6]\\n';;\n\
         -V) printf \"Version needs section '.gnu.version_r' contains 1 entry:\\n  000000: Version: 1  File: libc.so.6  Cnt: 2\\n  0x0010:   Name: GLIBC_2.2.5  Flags: none  Version: 2\\n  0x0020:   Name: GLIBC_2.38  Flags: none  Version: 3\\n\";;\n\
         esac\n",
    );
    let (code, out) = check_portable(ours, Some(dir.path()));
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("FAIL: needs libz.so.1"), "{out}");
    assert!(
        out.contains("FAIL: needs GLIBC_2.38, newer than GLIBC_2.34"),
        "{out}"
    );
    let (code, _) = check_portable(&dir.path().join("missing"), None);
    assert_eq!(code, 2);
}

/// A round-robin TCP router on loopback: each accepted connection goes to
/// the next backend, bytes copied both ways until either side closes. Its
/// threads end with the test process.
fn start_router(backends: Vec<u16>) -> u16 {
    use std::net::{Shutdown, TcpListener, TcpStream};
    let listener = TcpListener::bind("127.0.0.1:0").expect("router binds");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for (i, conn) in listener.incoming().enumerate() {
            let Ok(client) = conn else { continue };
            let backend = backends[i % backends.len()];
            let Ok(server) = TcpStream::connect(("127.0.0.1", backend)) else {
                continue;
            };
            let pipe = |mut from: TcpStream, mut to: TcpStream| {
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut from, &mut to);
                    let _ = to.shutdown(Shutdown::Write);
                });
            };
            let (c2, s2) = (
                client.try_clone().expect("clone"),
                server.try_clone().expect("clone"),
            );
            pipe(client, server);
            pipe(s2, c2);
        }
    });
    port
}

/// GET `path` from a loopback port (HTTP/1.0: the answer ends at close).
fn http_get(port: u16, path: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").expect("send");
    let mut out = String::new();
    s.read_to_string(&mut out).expect("read");
    out
}

/// Wait (at most 30 s) until something listens on `port`.
fn wait_listening(port: u16) {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            std::time::Instant::now() < until,
            "nothing listens on {port}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// A counter's value in a Prometheus page (summed over its series).
fn counter(page: &str, name: &str) -> f64 {
    page.lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with([' ', '{']))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// The benchmark through `router` with the replicas' `metrics` URLs and
/// `args`, writing `out`: its valid result.
fn run_behind(router: u16, metrics: &[String], args: &[&str], out: &Path) -> Value {
    let mut all = vec!["--host".to_string(), format!("http://127.0.0.1:{router}")];
    for m in metrics {
        all.extend(["--metrics-url".to_string(), m.clone()]);
    }
    all.extend(args.iter().map(|a| a.to_string()));
    all.extend(["--display-mode", "plain", "--no-hw-monitor", "--output"].map(String::from));
    all.push(out.display().to_string());
    let o = run(&all);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(out).expect("result")).expect("JSON");
    common::assert_valid(&doc);
    doc
}

struct Killed(std::process::Child);
impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn metrics_urls_sum_the_replicas_behind_a_router() {
    let (a, b) = (common::free_port(), common::free_port());
    let _sims = [Killed(common::spawn_sim(a)), Killed(common::spawn_sim(b))];
    wait_listening(a);
    wait_listening(b);
    let router = start_router(vec![a, b]);
    let (_d, out) = common::tmp("r.json");
    let metrics = [
        format!("http://127.0.0.1:{a}"),
        format!("http://127.0.0.1:{b}/metrics"),
    ];
    let run_args = [
        "--concurrency",
        "8",
        "--contexts",
        "0",
        "--duration",
        "3",
        "--decode-warmup-seconds",
        "0",
        "--skip-prefill",
    ];
    let doc = run_behind(router, &metrics, &run_args, &out);
    // The KV budget is both replicas' (quickstart: 16 tokens x 200,000 blocks each).
    let md = &doc["metadata"];
    assert_eq!(md["kv_budget_tokens"], 2 * 16 * 200_000, "{md}");
    assert!(
        md["kv_budget_source"]
            .as_str()
            .unwrap_or("")
            .contains("2 replicas"),
        "{md}"
    );
    // recorded as one list, as --config and rerun read it back
    assert_eq!(
        md["config"]["metrics-url"],
        format!("http://127.0.0.1:{a},http://127.0.0.1:{b}/metrics"),
        "{md}"
    );
    // Both replicas served streams (the router alternates connections)...
    for port in [a, b] {
        let page = http_get(port, "/metrics");
        assert!(
            counter(&page, "vllm:generation_tokens_total") > 0.0,
            "replica {port} idle"
        );
    }
    // ...and the server-side count of the window is their sum: it matches
    // the tokens the client received from both (either replica alone would
    // be about half).
    let cell = &doc["results"][0];
    let client = cell["client_output_tokens"]
        .as_f64()
        .expect("client tokens");
    let server = cell["server_output_tokens"]
        .as_f64()
        .expect("server tokens");
    assert!(client > 0.0, "{cell}");
    assert!(
        (server / client - 1.0).abs() < 0.05,
        "server {server} vs client {client}: {cell}"
    );
}

/// A simulator with SGLang's metrics on `port`.
fn spawn_sglang_sim(port: u16) -> Killed {
    Killed(
        common::bin()
            .args(["sim", "--scenario", "quickstart", "--engine", "sglang"])
            .args(["--port", &port.to_string()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("simulator starts"),
    )
}

/// A non-streamed chat request straight to a replica.
fn chat(port: u16, content: &str) {
    use std::io::{Read, Write};
    let body = serde_json::json!({
        "model": "sim-quickstart-8b",
        "messages": [{"role": "user", "content": content}],
        "max_tokens": 2,
    })
    .to_string();
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    write!(
        s,
        "POST /v1/chat/completions HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .expect("send");
    let mut out = String::new();
    s.read_to_string(&mut out).expect("read");
    assert!(
        out.starts_with("HTTP/1.1 200") || out.starts_with("HTTP/1.0 200"),
        "{out}"
    );
}

/// Whether a page has a sample (not only the HELP/TYPE lines) of `name`.
fn has_series(page: &str, name: &str) -> bool {
    page.lines()
        .any(|l| l.starts_with(name) && l[name.len()..].starts_with([' ', '{']))
}

/// SGLang exports `sglang:cached_tokens_total` only after a replica's first
/// cache hit. Replica 1 has hits before the run, replica 2 has none until
/// the run gives it some: the fleet's achieved hit rate is each replica's
/// delta (replica 2's from 0), summed, and the result says what it rests
/// on. Summed first, the start would be unknown and read as 0, and replica
/// 1's hits from before the run would count.
#[test]
fn a_replica_whose_hit_counter_appears_late_counts_from_zero() {
    let (a, b) = (common::free_port(), common::free_port());
    let _sims = [spawn_sglang_sim(a), spawn_sglang_sim(b)];
    wait_listening(a);
    wait_listening(b);
    let cached = "sglang:cached_tokens_total";
    let long = "word ".repeat(4000);
    for _ in 0..3 {
        chat(a, &long);
    }
    let before = [http_get(a, "/metrics"), http_get(b, "/metrics")];
    assert!(counter(&before[0], cached) > 8000.0, "{}", before[0]);
    assert!(!has_series(&before[1], cached), "{}", before[1]);
    // 40 requests 50 ms apart in 4 groups sharing their first 512-token block
    let (dir, trace) = common::tmp("groups.jsonl");
    let rows: String = (0..40)
        .map(|i| {
            format!(
                "{{\"timestamp\": {}, \"input_length\": 1024, \"output_length\": 4, \
                 \"hash_ids\": [{}, {}]}}\n",
                i * 50,
                i % 4,
                100 + i
            )
        })
        .collect();
    std::fs::write(&trace, rows).expect("trace");
    let out = dir.path().join("r.json");
    let router = start_router(vec![a, b]);
    let metrics = [a, b].map(|p| format!("http://127.0.0.1:{p}"));
    let t = trace.to_str().expect("path");
    let args = ["--trace", t, "--trace-tokenize-checks", "0"];
    let doc = run_behind(router, &metrics, &args, &out);
    let after = [http_get(a, "/metrics"), http_get(b, "/metrics")];
    assert!(
        has_series(&after[1], cached),
        "replica 2 had no hit: {}",
        after[1]
    );
    let delta = |name: &str| -> f64 {
        (0..2)
            .map(|i| counter(&after[i], name) - counter(&before[i], name))
            .sum()
    };
    let truth = delta(cached) / delta("sglang:prompt_tokens_total");
    let pc = &doc["trace_results"][0]["prefix_cache"];
    let achieved = pc["server_prefix_cache_hit_rate"].as_f64().expect("rate");
    assert!(
        (achieved - truth).abs() < 0.01,
        "achieved {achieved} vs {truth}: {pc}"
    );
    assert_eq!(pc["achieved_source"], "sglang_counters", "{pc}");
    let basis = pc["achieved_basis"].as_str().unwrap_or_default();
    assert!(
        basis.contains("2 replicas") && basis.contains("replica 2: no hits series at the start"),
        "{basis}"
    );
}
