//! `--allow-download` against a loopback HTTP server the tests start: the
//! pin is overridden (`ProfileRequest::pin_override`) to point at it.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use ldb_eval::sha256::sha256_hex;

use super::*;

const GSM: &str = "{\"question\": \"q1\", \"answer\": \"w\\n#### 5\"}\n{\"question\": \"q2\", \"answer\": \"w\\n#### 6\"}\n";

/// Serves `body` to every GET on 127.0.0.1 and counts the requests. The
/// accept loop lives until the test process ends.
fn serve(body: &'static str) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/gsm8k_test.jsonl", listener.local_addr().unwrap());
    let hits = Arc::new(AtomicUsize::new(0));
    let counted = hits.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            counted.fetch_add(1, Ordering::SeqCst);
            // read the request head (small GET, no body)
            let mut head = Vec::new();
            let mut buf = [0u8; 1024];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                match conn.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => head.extend_from_slice(&buf[..n]),
                }
            }
            let _ = write!(
                conn,
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (url, hits)
}

fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

fn request(cache: &Path, url: &str, sha: &str, allow_download: bool) -> ProfileRequest {
    ProfileRequest {
        name: Some("gsm8k".into()),
        cache_dir: Some(cache.to_path_buf()),
        allow_download,
        pin_override: Some(Pin {
            file: "gsm8k_test.jsonl",
            rows: 2,
            sha256: Some(leak(sha.to_owned())),
            url: Some(leak(url.to_owned())),
            archive: None,
        }),
        ..Default::default()
    }
}

#[test]
fn good_file_is_downloaded_cached_and_used() {
    let (url, hits) = serve(GSM);
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("datasets");
    let sha = sha256_hex(GSM.as_bytes());
    let t = load_profile(&request(&cache, &url, &sha, true)).unwrap();
    assert_eq!(t.items.len(), 2);
    let info = t.dataset.unwrap();
    assert_eq!(
        (info.source.as_str(), info.sha256.as_str()),
        ("download", sha.as_str())
    );
    assert_eq!(hits.load(Ordering::SeqCst), 1);
    assert_eq!(
        std::fs::read_to_string(cache.join("gsm8k_test.jsonl")).unwrap(),
        GSM
    );
    // nothing but the file is left in the cache
    assert_eq!(std::fs::read_dir(&cache).unwrap().count(), 1);
    // the next run reads the cache, without a request and without the flag
    let t = load_profile(&request(&cache, &url, &sha, false)).unwrap();
    assert_eq!(t.dataset.unwrap().source, "pinned-cache");
    assert_eq!(hits.load(Ordering::SeqCst), 1);
}

#[test]
fn wrong_sha256_is_refused_and_not_cached() {
    let (url, hits) = serve(GSM);
    let dir = tempfile::tempdir().unwrap();
    let want = "0".repeat(64);
    let e = load_profile(&request(dir.path(), &url, &want, true))
        .unwrap_err()
        .0;
    let got = sha256_hex(GSM.as_bytes());
    assert!(
        e.contains(&url) && e.contains(&got) && e.contains(&want) && !e.contains('\n'),
        "{e}"
    );
    assert_eq!(hits.load(Ordering::SeqCst), 1);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn without_the_flag_no_request_is_made() {
    let (url, hits) = serve(GSM);
    let dir = tempfile::tempdir().unwrap();
    let sha = sha256_hex(GSM.as_bytes());
    let e = load_profile(&request(dir.path(), &url, &sha, false))
        .unwrap_err()
        .0;
    let path = dir.path().join("gsm8k_test.jsonl");
    assert!(
        e.contains(&url)
            && e.contains(&path.display().to_string())
            && e.contains("--allow-download")
            && !e.contains('\n'),
        "{e}"
    );
    assert_eq!(hits.load(Ordering::SeqCst), 0);
    assert!(!path.exists());
}

#[test]
fn cached_file_with_wrong_sha256_is_refused_without_a_request() {
    let (url, hits) = serve(GSM);
    let dir = tempfile::tempdir().unwrap();
    let bad = GSM.replace("#### 6", "#### 9");
    std::fs::write(dir.path().join("gsm8k_test.jsonl"), &bad).unwrap();
    let sha = sha256_hex(GSM.as_bytes());
    let e = load_profile(&request(dir.path(), &url, &sha, true))
        .unwrap_err()
        .0;
    assert!(
        e.contains(&sha256_hex(bad.as_bytes())) && e.contains(&sha) && !e.contains('\n'),
        "{e}"
    );
    // a bad cached copy is the user's to remove, not silently replaced
    assert_eq!(hits.load(Ordering::SeqCst), 0);
}

#[test]
fn http_errors_and_unreachable_servers_are_one_line() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/x", listener.local_addr().unwrap());
    drop(listener);
    let dir = tempfile::tempdir().unwrap();
    let e = load_profile(&request(dir.path(), &url, &"0".repeat(64), true))
        .unwrap_err()
        .0;
    assert!(e.contains(&url) && !e.contains('\n'), "{e}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}
