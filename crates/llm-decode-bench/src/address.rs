//! `--host` / `--port` → the server's base URL and its report label,
//! checked by the URL parser the requests use, so a malformed address is a
//! configuration error (exit 2) before anything is sent.

use crate::config::{ConfigError, bad};

/// Base URL and report label from `--host` / `--port`: the URL is parsed
/// here, by the parser the requests use, so a malformed one is exit 2
/// before anything is sent.
pub fn server_address(host: &str, port: Option<u16>) -> Result<(String, String), ConfigError> {
    let (base, label) = compose_address(host, port)?;
    ldb_client::http::check_base_url(&base).map_err(|e| {
        // The message lands on screen: never with credentials.
        bad(
            "--host",
            format!("{:?}: {e}", ldb_core::redact::redact_url(host.trim())),
        )
    })?;
    Ok((base, label))
}

/// `--host` / `--port` put together, before the URL is parsed.
fn compose_address(host: &str, port: Option<u16>) -> Result<(String, String), ConfigError> {
    let host = host.trim();
    if host.is_empty() {
        return Err(bad("--host", "empty"));
    }
    if host.starts_with("http://") || host.starts_with("https://") {
        let trimmed = host.trim_end_matches('/');
        let (scheme, rest) = trimmed
            .split_once("://")
            .ok_or_else(|| bad("--host", host))?;
        let (hostport, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        if hostport.is_empty() {
            return Err(bad("--host", format!("{host:?} has no host name")));
        }
        let has_port = hostport
            .rsplit_once(':')
            .is_some_and(|(_, p)| p.chars().all(|c| c.is_ascii_digit()))
            && !hostport.ends_with(']');
        let base = match port {
            Some(p) if !has_port => format!("{scheme}://{hostport}:{p}{path}"),
            _ => trimmed.to_string(),
        };
        // The label lands in the result and on screen: never with credentials.
        return Ok((base, ldb_core::redact::redact_url(trimmed)));
    }
    if host.contains('/') || host.contains(' ') {
        return Err(bad(
            "--host",
            format!("{host:?} is neither a host name nor an http(s) URL"),
        ));
    }
    let port = port.unwrap_or(5000);
    Ok((format!("http://{host}:{port}"), format!("{host}:{port}")))
}

/// `--metrics-url` values, each checked like `--host` (one line naming the
/// URL, credentials removed, before anything is sent).
pub fn metrics_urls(urls: &[String]) -> Result<Vec<String>, ConfigError> {
    urls.iter()
        .map(|u| {
            let u = u.trim();
            let base = ldb_client::replicas::replica_base(u);
            ldb_client::http::check_base_url(base).map_err(|e| {
                bad(
                    "--metrics-url",
                    format!("{:?}: {e}", ldb_core::redact::redact_url(u)),
                )
            })?;
            Ok(u.to_string())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_forms() {
        assert_eq!(
            server_address("localhost", None).unwrap(),
            ("http://localhost:5000".into(), "localhost:5000".into())
        );
        assert_eq!(
            server_address("http://10.0.0.1/v1/", Some(8000)).unwrap().0,
            "http://10.0.0.1:8000/v1"
        );
        assert_eq!(
            server_address("https://h:9000", Some(1)).unwrap().0,
            "https://h:9000"
        );
        assert!(server_address("http://", None).is_err());
        let (base, label) = server_address("https://user:pw@h:1/v1", None).unwrap();
        assert_eq!(base, "https://user:pw@h:1/v1");
        assert!(!label.contains("pw"), "{label}");
        assert!(server_address("a b", None).is_err());
    }

    #[test]
    fn malformed_urls_are_configuration_errors() {
        for (host, port) in [
            ("http://[::1", None),
            ("http://[::1", Some(8000)),
            ("[::1", None),
            ("http://h:99999", None),
            ("http://h:12ab/v1", None),
            ("http://[zz]:80", None),
            ("https://user:secret@[::1/v1", None),
        ] {
            let e = server_address(host, port).unwrap_err().0;
            assert!(e.starts_with("invalid --host: "), "{host}: {e}");
            assert!(!e.contains("secret"), "{e}");
            assert_eq!(e.lines().count(), 1, "{e}");
        }
        assert_eq!(
            server_address("http://[::1]", Some(8000)).unwrap().0,
            "http://[::1]:8000"
        );
        assert_eq!(
            server_address("::1", None).ok().map(|a| a.0),
            None,
            "a bare IPv6 address needs brackets"
        );
        assert_eq!(
            server_address("[::1]", Some(7)).unwrap().0,
            "http://[::1]:7"
        );
    }

    #[test]
    fn metrics_urls_are_checked_and_never_echo_credentials() {
        let ok = metrics_urls(&[
            "http://10.0.0.5:8000/metrics".into(),
            " http://b:8000 ".into(),
        ])
        .unwrap();
        assert_eq!(ok, ["http://10.0.0.5:8000/metrics", "http://b:8000"]);
        let e = metrics_urls(&["ftp://u:hunter2@a/metrics".into()])
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("invalid --metrics-url"), "{e}");
        assert!(!e.contains("hunter2"), "{e}");
        assert!(metrics_urls(&["a:8000".into()]).is_err());
    }
}
