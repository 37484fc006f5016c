//! The KV budget: manual, or the server's local KV size × context parallelism.

use ldb_client::Http;
use ldb_client::discovery::Discovery;
use ldb_core::tokens::thousands;

use crate::config::KvConfig;

/// The budget and where it came from.
#[derive(Debug, Clone, Default)]
pub struct KvBudget {
    /// Tokens (0 = unknown, no KV skips).
    pub budget: u64,
    /// Where the budget came from.
    pub source: String,
    /// Context-parallel multiplier applied.
    pub cp_size: u64,
    /// Where the multiplier came from.
    pub cp_source: String,
    /// Event lines.
    pub notes: Vec<String>,
}

/// Decide the budget (see docs/methodology.md, "KV budget").
pub fn kv_budget(cfg: &KvConfig, d: &Discovery, http: &Http) -> KvBudget {
    let mut kv = KvBudget {
        cp_size: 1,
        cp_source: "default".into(),
        ..KvBudget::default()
    };
    if cfg.kv_budget > 0 || cfg.max_total_tokens > 0 {
        kv.budget = if cfg.kv_budget > 0 {
            cfg.kv_budget
        } else {
            cfg.max_total_tokens
        };
        kv.source = if cfg.kv_budget > 0 {
            "argument:--kv-budget"
        } else {
            "argument:--max-total-tokens"
        }
        .into();
        kv.cp_source = "not applied".into();
        kv.notes.push(format!(
            "KV cache budget manual: {} tokens",
            thousands(kv.budget)
        ));
        return kv;
    }
    if d.kv_local_tokens == 0 {
        kv.source = "unknown".into();
        kv.notes
            .push("KV cache budget not available from the server; no KV-based skips".into());
        return kv;
    }
    let (cp, cp_source) = if cfg.dcp_size > 0 {
        (cfg.dcp_size, "argument".to_string())
    } else if let Some((cp, src)) = &d.cp_from_labels {
        (*cp, src.clone())
    } else if let Some(cp) = local_process_cp(http) {
        (cp, "local process".to_string())
    } else {
        (1, "default".to_string())
    };
    let local = d.kv_local_tokens;
    if cp_source == "default"
        && d.model_context > 0
        && local < d.model_context
        && d.engine != ldb_core::engine::Engine::LlamaCpp
    {
        kv.source = "unknown".into();
        kv.notes.push(format!(
            "local KV {} tokens is below the model context {}; context parallelism is likely. \
             Leaving the KV budget unset: pass --dcp-size or --kv-budget",
            thousands(local),
            thousands(d.model_context)
        ));
        return kv;
    }
    kv.budget = local * cp;
    kv.cp_size = cp;
    kv.cp_source = cp_source.clone();
    kv.source = d.kv_local_source.clone();
    let blocks = d
        .kv_blocks
        .map(|(n, b)| format!("{n} blocks x {b}; "))
        .unwrap_or_default();
    let cp_part = if cp > 1 {
        format!("local {} × CP {cp}; ", thousands(local))
    } else {
        String::new()
    };
    kv.notes.push(format!(
        "KV cache budget from {}: {} tokens ({blocks}{cp_part}CP source: {cp_source})",
        d.engine.display_name(),
        thousands(kv.budget)
    ));
    kv
}

/// On a loopback server, find `--decode-context-parallel-size` on the command
/// line of the vLLM process that listens on our port.
fn local_process_cp(http: &Http) -> Option<u64> {
    let base = http.base();
    let rest = base.split("://").nth(1)?;
    let hostport = rest.split('/').next()?;
    let (host, port) = hostport.rsplit_once(':')?;
    let host = host.trim_matches(['[', ']']);
    if !matches!(host, "localhost" | "127.0.0.1" | "0.0.0.0" | "::1") {
        return None;
    }
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(raw) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<String> = raw
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        if !args.iter().any(|a| a.contains("vllm")) {
            continue;
        }
        if flag_value(&args, "--port").as_deref() != Some(port) {
            continue;
        }
        if let Some(v) =
            flag_value(&args, "--decode-context-parallel-size").and_then(|v| v.parse().ok())
        {
            return Some(v);
        }
    }
    None
}

fn flag_value(args: &[String], flag: &str) -> Option<String> {
    args.iter().enumerate().find_map(|(i, a)| {
        a.strip_prefix(&format!("{flag}="))
            .map(str::to_string)
            .or_else(|| (a == flag).then(|| args.get(i + 1).cloned()).flatten())
    })
}
