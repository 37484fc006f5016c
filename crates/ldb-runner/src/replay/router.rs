//! Sessions through a router: the per-session header routers key their
//! affinity on (`--session-header`, `--session-header-value`), the replica
//! header a router may answer with (`--replica-header`), and, with
//! `--metrics-url` per replica, the reads of the replicas' counters that
//! attribute a turn sent alone (docs/methodology.md, "Session affinity
//! through a router"). The arithmetic is `ldb_core::replay::affinity`.

use std::sync::{Arc, Mutex};

use ldb_client::http::Http;
use ldb_client::replicas::replica_base;
use ldb_client::scrape::{Scrape, Scraper};
use ldb_core::replay::affinity::{
    CounterRead, RouterAffinity, TurnSpan, attribute, replica_named, summarise,
};

use crate::ctx::RunCtx;
use crate::prefix_achieved::counted_hits;

/// The default `--session-header-value`.
pub const DEFAULT_TEMPLATE: &str = "{run}-{session}";

/// What the router flags asked for.
#[derive(Debug, Clone, Default)]
pub struct RouterOptions {
    /// `--session-header NAME` and its value template.
    pub session_header: Option<(String, String)>,
    /// `--replica-header NAME`.
    pub replica_header: Option<String>,
}

impl RouterOptions {
    /// Whether any router flag was given.
    pub fn any(&self) -> bool {
        self.session_header.is_some() || self.replica_header.is_some()
    }
}

/// Header names a session header may not take: the ones that carry
/// credentials (a result file from someone else could otherwise make a
/// rerun put a chosen value where a secret goes) and the ones that frame
/// the request itself.
const RESERVED: &[&str] = &[
    "authorization",
    "proxy-authorization",
    "cookie",
    "x-api-key",
    "api-key",
    "host",
    "content-length",
    "content-type",
    "transfer-encoding",
    "connection",
    "te",
    "upgrade",
];

/// A header name as a flag gives it: an HTTP token, not a reserved one.
pub fn check_header_name(name: &str) -> Result<(), String> {
    let token = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
    if !token {
        return Err(format!("{name:?} is not an HTTP header name"));
    }
    if RESERVED.contains(&name.to_ascii_lowercase().as_str()) {
        return Err(format!(
            "{name:?} is reserved (credentials or request framing)"
        ));
    }
    Ok(())
}

/// The header value of session `session` in run `run` (hex): `{run}` and
/// `{session}` replaced; any other `{…}` is an error, as is a character a
/// header value cannot carry.
pub fn header_value(template: &str, run: u64, session: u64) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = template;
    while let Some(i) = rest.find('{') {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        let end = tail.find('}').ok_or("an unclosed '{'")?;
        match &tail[..=end] {
            "{run}" => out.push_str(&format!("{run:016x}")),
            "{session}" => out.push_str(&session.to_string()),
            other => {
                return Err(format!(
                    "unknown placeholder {other} (use {{run}}, {{session}})"
                ));
            }
        }
        rest = &tail[end + 1..];
    }
    out.push_str(rest);
    // Printable ASCII only: what every HTTP stack sends unchanged.
    if !out.bytes().all(|b| (0x20..0x7f).contains(&b)) || out.len() > 256 {
        return Err("a header value of printable ASCII characters, at most 256".into());
    }
    Ok(out)
}

/// What the session loop shares for the router: the turns' spans and the
/// counter reads.
pub(super) struct Tracker {
    opts: RouterOptions,
    run: u64,
    /// The run's client, which each session's turns go through with its
    /// headers.
    http: Http,
    /// Reads the replicas' counters after a turn sent alone; none over
    /// shards (one shard does not see the others' turns in flight: those
    /// turns are attributed by the replica header or not at all).
    scraper: Option<Scraper>,
    /// The replicas' base URLs (`--metrics-url`), to name them from a header.
    bases: Vec<String>,
    turns: Mutex<Vec<TurnSpan>>,
    reads: Arc<Mutex<Vec<CounterRead>>>,
    pending: Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

/// One scrape's per-replica counters as the rule reads them.
fn counter_read(s: &Scrape) -> CounterRead {
    CounterRead {
        sent: s.sent,
        t: s.t,
        replicas: s
            .parts
            .iter()
            .map(|p| (p.prefix_queries, p.prefix_hits))
            .collect(),
    }
}

impl Tracker {
    /// A tracker for run `run` (the session's content salt), or `None`
    /// without router flags and without replicas.
    /// `sharded`: the run's sessions are dealt over shards (no counter
    /// reads between turns).
    pub(super) fn new(
        rc: &RunCtx,
        opts: &RouterOptions,
        run: u64,
        sharded: bool,
    ) -> Option<Arc<Tracker>> {
        let bases: Vec<String> = rc
            .cfg
            .target
            .metrics_urls
            .iter()
            .map(|u| replica_base(u).to_string())
            .collect();
        let scraper = (!sharded).then(|| rc.scraper.clone());
        Tracker::with(opts, run, (rc.http.clone(), scraper), bases)
    }

    /// A tracker over `http` (and `scraper`, for the reads between turns),
    /// or `None` without router flags and without replicas.
    pub(super) fn with(
        opts: &RouterOptions,
        run: u64,
        (http, scraper): (Http, Option<Scraper>),
        bases: Vec<String>,
    ) -> Option<Arc<Tracker>> {
        if !opts.any() && bases.is_empty() {
            return None;
        }
        Some(Arc::new(Tracker {
            opts: opts.clone(),
            run,
            http,
            scraper,
            bases,
            turns: Mutex::default(),
            reads: Arc::default(),
            pending: Mutex::default(),
        }))
    }

    /// The replicas' base URLs.
    pub(super) fn bases(&self) -> &[String] {
        &self.bases
    }

    /// The client session `id`'s turns go through: the run's, with the
    /// session header and the noted replica header.
    pub(super) fn http_for(&self, id: u64) -> Http {
        let header = self.opts.session_header.as_ref().and_then(|(n, t)| {
            let v = header_value(t, self.run, id).ok()?;
            Some((n.clone(), v))
        });
        let noted = self.opts.replica_header.as_deref();
        let pair = header.as_ref().map(|(n, v)| (n.as_str(), v.as_str()));
        // Name and template were checked when the flags were read (a
        // follower checks the leader's order before it runs).
        self.http
            .clone()
            .with_headers(pair, noted)
            .unwrap_or_else(|_| self.http.clone())
    }

    /// Turns another shard sent, their times already on this clock.
    pub(super) fn absorb(&self, spans: Vec<TurnSpan>) {
        self.turns
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(spans);
    }

    /// Every turn recorded so far (a follower sends them to the leader).
    pub(super) fn take_turns(&self) -> Vec<TurnSpan> {
        std::mem::take(&mut *self.turns.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Record a turn; `noted` is the replica header's value.
    pub(super) fn turn(&self, mut span: TurnSpan, noted: Option<&str>) {
        span.header = noted.and_then(|v| replica_named(v, &self.bases));
        self.turns
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(span);
    }

    /// Read the replicas' counters now, in the background (called when a
    /// turn ended and no other was in flight: at most one read per turn).
    pub(super) fn read_soon(&self) {
        let Some(scraper) = self.scraper.clone().filter(|_| !self.bases.is_empty()) else {
            return;
        };
        let reads = self.reads.clone();
        let h = tokio::spawn(async move {
            if let Some(s) = scraper.scrape_once().await {
                reads
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(counter_read(&s));
            }
        });
        self.pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(h);
    }

    /// The affinity result from the turns, the reads, and the run's first
    /// and last scrape (`scrapes`, for each replica's own hit rate).
    pub(super) async fn finish(
        &self,
        scrapes: (Option<&Scrape>, Option<&Scrape>),
    ) -> RouterAffinity {
        let pending = std::mem::take(&mut *self.pending.lock().unwrap_or_else(|p| p.into_inner()));
        futures_util::future::join_all(pending).await;
        let mut reads = std::mem::take(&mut *self.reads.lock().unwrap_or_else(|p| p.into_inner()));
        reads.extend(scrapes.0.into_iter().chain(scrapes.1).map(counter_read));
        reads.sort_by(|a, b| a.sent.total_cmp(&b.sent));
        let turns = std::mem::take(&mut *self.turns.lock().unwrap_or_else(|p| p.into_inner()));
        let found = attribute(&turns, &reads);
        let per_replica: Vec<Option<(f64, f64)>> = match scrapes {
            (Some(a), Some(b)) if a.parts.len() == b.parts.len() => a
                .parts
                .iter()
                .zip(&b.parts)
                .map(|(x, y)| counted_hits(x, y))
                .collect(),
            _ => vec![None; self.bases.len()],
        };
        RouterAffinity {
            session_header: self.opts.session_header.as_ref().map(|h| h.0.clone()),
            replica_header: self.opts.replica_header.clone(),
            counter_reads: reads.len() as u64,
            ..summarise(&turns, &found, &per_replica)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_template_fills_its_placeholders_and_refuses_others() {
        assert_eq!(
            header_value(DEFAULT_TEMPLATE, 0xab, 7).unwrap(),
            "00000000000000ab-7"
        );
        assert_eq!(header_value("s{session}", 1, 3).unwrap(), "s3");
        assert_eq!(header_value("fixed", 1, 3).unwrap(), "fixed");
        assert!(
            header_value("{HOME}", 1, 3)
                .unwrap_err()
                .contains("unknown")
        );
        assert!(header_value("{run", 1, 3).is_err());
        assert!(header_value("a\nb", 1, 3).is_err());
        assert!(header_value("café-{session}", 1, 3).is_err());
    }

    #[test]
    fn header_names_must_be_tokens_and_not_carry_credentials() {
        assert!(check_header_name("x-session-id").is_ok());
        assert!(check_header_name("X-Correlation_ID").is_ok());
        for bad in [
            "Authorization",
            "cookie",
            "X-API-Key",
            "host",
            "a b",
            "",
            "a:b",
        ] {
            assert!(check_header_name(bad).is_err(), "{bad}");
        }
    }
}
