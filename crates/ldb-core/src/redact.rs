//! Secret redaction for anything written into result files: arguments,
//! environment variables, command lines and URLs.
//!
//! A value is replaced by [`REDACTED`] when its *name* looks secret
//! ([`is_secret_name`]) or the *value itself* looks like a credential
//! ([`looks_like_secret_value`]). Credentials inside URLs
//! (`https://user:pass@host`) lose their user-info part.

use std::collections::BTreeMap;

/// Replacement text for a redacted value.
pub const REDACTED: &str = "<redacted>";

/// Environment-variable prefixes recorded in the startup diagnostics.
pub const DIAGNOSTIC_ENV_PREFIXES: [&str; 5] = ["NCCL_", "VLLM_", "SGLANG_", "CUDA_", "OMP_"];

/// Name segments that mark a secret on their own.
const SECRET_SEGMENTS: [&str; 12] = [
    "KEY",
    "APIKEY",
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "PWD",
    "AUTH",
    "AUTHORIZATION",
    "CREDENTIAL",
    "CREDENTIALS",
    "BEARER",
];
/// Suffixes that mark a glued-together segment (`HFTOKEN`, `APIKEY`).
const SECRET_SUFFIXES: [&str; 4] = ["KEY", "TOKEN", "SECRET", "PASSWORD"];

/// Value prefixes used by common credential formats.
const SECRET_VALUE_PREFIXES: [&str; 10] = [
    "sk-",
    "hf_",
    "ghp_",
    "gho_",
    "ghs_",
    "github_pat_",
    "xoxb-",
    "xoxp-",
    "AKIA",
    "eyJ",
];

/// True when a flag or variable name looks like it holds a secret: one of
/// its `_`/`-`/`.`-separated segments is KEY, TOKEN, SECRET, PASSWORD, AUTH,
/// … (or ends in KEY/TOKEN/SECRET/PASSWORD). Counting words such as
/// `max_tokens` or `tokenizer` are not secrets.
pub fn is_secret_name(name: &str) -> bool {
    let upper = name.trim_start_matches('-').to_ascii_uppercase();
    upper
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|s| !s.is_empty())
        .any(|seg| {
            SECRET_SEGMENTS.contains(&seg) || SECRET_SUFFIXES.iter().any(|suf| seg.ends_with(suf))
        })
}

/// True when a value looks like a credential: `Bearer …`, a well-known key
/// prefix (`sk-`, `hf_`, `ghp_`, JWT `eyJ…`) followed by enough characters,
/// or a long (≥ 32) opaque string: all hex digits, or only letters and digits
/// mixing upper case, lower case and digits.
pub fn looks_like_secret_value(value: &str) -> bool {
    let v = value.trim();
    if v.len() >= 8
        && v.get(..7)
            .is_some_and(|p| p.eq_ignore_ascii_case("bearer "))
    {
        return true;
    }
    let token_chars = |s: &str| {
        s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
    };
    if SECRET_VALUE_PREFIXES.iter().any(|p| v.starts_with(p)) && v.len() >= 16 && token_chars(v) {
        return true;
    }
    // Long opaque strings: hex keys and digests, or base62 keys mixing upper
    // case, lower case and digits. Model names and paths carry separators.
    let long = v.len() >= 32;
    let hex = long && v.chars().all(|c| c.is_ascii_hexdigit());
    let base62 = long
        && v.chars().all(|c| c.is_ascii_alphanumeric())
        && v.chars().any(|c| c.is_ascii_uppercase())
        && v.chars().any(|c| c.is_ascii_lowercase())
        && v.chars().any(|c| c.is_ascii_digit());
    hex || base62
}

/// Removes `user:password@` from a URL-like string, or from each URL of a
/// comma-separated list (a repeated flag such as `--metrics-url` is recorded
/// as one); other text unchanged.
pub fn redact_url(s: &str) -> String {
    if s.contains(',') {
        return s
            .split(',')
            .map(redact_one_url)
            .collect::<Vec<_>>()
            .join(",");
    }
    redact_one_url(s)
}

fn redact_one_url(s: &str) -> String {
    let Some(scheme_end) = s.find("://") else {
        return s.to_string();
    };
    let rest = &s[scheme_end + 3..];
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let url = match rest[..authority_end].rfind('@') {
        Some(at) => format!("{}{REDACTED}@{}", &s[..scheme_end + 3], &rest[at + 1..]),
        None => s.to_string(),
    };
    redact_query(&url)
}

/// `?api_key=…`, `&token=…` and any query parameter named like a secret
/// (see [`is_secret_name`]) keep their name and lose their value.
fn redact_query(url: &str) -> String {
    let Some(q) = url.find('?') else {
        return url.to_string();
    };
    let (head, query) = url.split_at(q + 1);
    let (query, fragment) = match query.find('#') {
        Some(h) => query.split_at(h),
        None => (query, ""),
    };
    let params: Vec<String> = query
        .split('&')
        .map(|p| match p.split_once('=') {
            Some((name, value)) if !value.is_empty() && is_secret_name(name) => {
                format!("{name}={REDACTED}")
            }
            _ => p.to_string(),
        })
        .collect();
    format!("{head}{}{fragment}", params.join("&"))
}

/// Free text (an event-log line, a note, an error message) with every URL
/// in it redacted as by [`redact_url`]: `user:password@` and secret query
/// parameters. Words without `://` are unchanged, and so is the spacing.
pub fn redact_text(text: &str) -> String {
    if !text.contains("://") {
        return text.to_string();
    }
    text.split_inclusive(char::is_whitespace)
        .map(|word| {
            if word.contains("://") {
                let body = word.trim_end_matches(char::is_whitespace);
                format!("{}{}", redact_one_url(body), &word[body.len()..])
            } else {
                word.to_string()
            }
        })
        .collect()
}

/// Redacts one named value (see module docs).
pub fn redact_value(name: &str, value: &str) -> String {
    if value.is_empty() {
        return String::new();
    }
    if is_secret_name(name) || looks_like_secret_value(value) {
        REDACTED.to_string()
    } else {
        redact_url(value)
    }
}

/// Redacts a list of `(name, value)` pairs, keeping names and order.
pub fn redact_args(args: &[(String, String)]) -> Vec<(String, String)> {
    args.iter()
        .map(|(k, v)| (k.clone(), redact_value(k, v)))
        .collect()
}

/// Redacts a raw command line: `--api-key X`, `--api-key=X`, and values that
/// look secret on their own.
pub fn redact_argv(argv: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(argv.len());
    let mut hide_next = false;
    for arg in argv {
        if hide_next {
            out.push(REDACTED.to_string());
            hide_next = false;
            continue;
        }
        if let Some((flag, value)) = arg.split_once('=').filter(|(f, _)| f.starts_with('-')) {
            out.push(format!("{flag}={}", redact_value(flag, value)));
        } else if arg.starts_with('-') && is_secret_name(arg) {
            out.push(arg.clone());
            hide_next = true;
        } else {
            out.push(redact_value("", arg));
        }
    }
    out
}

/// Environment variables worth recording (names starting with one of
/// [`DIAGNOSTIC_ENV_PREFIXES`]), sorted, secret-looking values redacted.
pub fn diagnostic_env<I, K, V>(vars: I) -> BTreeMap<String, String>
where
    I: IntoIterator<Item = (K, V)>,
    K: AsRef<str>,
    V: AsRef<str>,
{
    vars.into_iter()
        .filter(|(k, _)| {
            DIAGNOSTIC_ENV_PREFIXES
                .iter()
                .any(|p| k.as_ref().starts_with(p))
        })
        .map(|(k, v)| (k.as_ref().to_string(), redact_value(k.as_ref(), v.as_ref())))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_names() {
        for n in [
            "api_key",
            "--api-key",
            "OPENAI_API_KEY",
            "HF_TOKEN",
            "HUGGING_FACE_HUB_TOKEN",
            "apikey",
            "VLLM_API_KEY",
            "AWS_SECRET_ACCESS_KEY",
            "db.password",
            "X-Auth-Token",
            "Authorization",
            "SGLANG_AUTH",
            "NCCL_HFTOKEN",
        ] {
            assert!(is_secret_name(n), "{n}");
        }
        for n in [
            "max_tokens",
            "--max-tokens",
            "tokenizer",
            "concurrency",
            "CUDA_VISIBLE_DEVICES",
            "NCCL_IB_HCA",
            "OMP_NUM_THREADS",
            "prefill_contexts",
            "kv_budget",
            "VLLM_ATTENTION_BACKEND",
        ] {
            assert!(!is_secret_name(n), "{n}");
        }
    }

    #[test]
    fn secret_values() {
        for v in [
            "Bearer abcdefghijkl",
            "sk-proj-AbCdEf0123456789",
            "hf_AbCdEfGhIjKlMnOpQrStUv",
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.abc",
            "a1b2c3d4e5f6a7b8c9d0a1b2c3d4e5f6a7b8",
            "aB3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF3hJ6",
        ] {
            assert!(looks_like_secret_value(v), "{v}");
        }
        for v in [
            "0,1,2,3",
            "meta-llama/Llama-3.1-8B-Instruct",
            "1,2,4",
            "8k,64k,128k",
            "http://127.0.0.1:5001",
            "Qwen3-Coder-480B-A35B-Instruct-FP8-Dynamic",
            "nvidia/Llama-3.3-70B-Instruct-FP8-dynamic-v2",
            "/models/deepseek/DeepSeek-V3.1-Terminus-AWQ",
            "client",
            "sk-",
        ] {
            assert!(!looks_like_secret_value(v), "{v}");
        }
    }

    #[test]
    fn args_and_argv() {
        let args = vec![
            ("api_key".to_string(), "abc".to_string()),
            ("concurrency".to_string(), "1,2,4".to_string()),
            ("server".to_string(), "https://u:p@host:8000/v1".to_string()),
            ("note".to_string(), "Bearer xyzxyzxyzxyz".to_string()),
        ];
        let r = redact_args(&args);
        assert_eq!(r[0].1, REDACTED);
        assert_eq!(r[1].1, "1,2,4");
        assert_eq!(r[2].1, "https://<redacted>@host:8000/v1");
        assert_eq!(r[3].1, REDACTED);
        let argv: Vec<String> = [
            "bench",
            "--api-key",
            "secret1",
            "--hf-token=abc",
            "--max-tokens",
            "1024",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(
            redact_argv(&argv),
            [
                "bench",
                "--api-key",
                REDACTED,
                "--hf-token=<redacted>",
                "--max-tokens",
                "1024"
            ]
        );
    }

    proptest::proptest! {
        #[test]
        fn redaction_never_panics(name in "\\PC{0,40}", value in "\\PC{0,80}") {
            let _ = redact_value(&name, &value);
            let _ = redact_argv(&[name.clone(), value.clone(), format!("{name}={value}")]);
        }
    }

    #[test]
    fn env_filter() {
        let env = [
            ("PATH", "/usr/bin"),
            ("NCCL_DEBUG", "INFO"),
            ("VLLM_API_KEY", "abc"),
            ("CUDA_VISIBLE_DEVICES", "0,1"),
            ("OMP_FOO", "sk-AbCdEf0123456789xyz"),
        ];
        let m = diagnostic_env(env);
        assert_eq!(m.len(), 4);
        assert_eq!(m["VLLM_API_KEY"], REDACTED);
        assert_eq!(m["NCCL_DEBUG"], "INFO");
        assert_eq!(m["OMP_FOO"], REDACTED);
        assert!(!m.contains_key("PATH"));
    }

    #[test]
    fn secret_query_parameters_and_urls_inside_text_are_redacted() {
        assert_eq!(
            redact_url("http://h:1/v1?api_key=abc&model=m#frag"),
            "http://h:1/v1?api_key=<redacted>&model=m#frag"
        );
        assert_eq!(
            redact_url("https://u:pw@h/x?access_token=t"),
            "https://<redacted>@h/x?access_token=<redacted>"
        );
        assert_eq!(
            redact_url("http://h/?max_tokens=5"),
            "http://h/?max_tokens=5"
        );
        assert_eq!(
            redact_text("metrics from http://bob:hunter2@h:9/metrics?token=z failed:\tretrying"),
            "metrics from http://<redacted>@h:9/metrics?token=<redacted> failed:\tretrying"
        );
        assert_eq!(redact_text("no url here: a@b"), "no url here: a@b");
    }

    #[test]
    fn each_url_of_a_list_loses_its_credentials() {
        assert_eq!(
            redact_url("http://a:1,http://u:pw@b:2/metrics"),
            format!("http://a:1,http://{REDACTED}@b:2/metrics")
        );
        assert_eq!(redact_url("x,y"), "x,y");
        assert!(!redact_value("metrics-url", "http://a:1/x,http://u:pw@b").contains("pw"));
    }
}
