//! A cell's TTFT breakdown (`ldb_core::ttft_breakdown`) from what the cell
//! measured: the scrapes that bracket its window and its requests.

use ldb_client::scrape::Scrape;
use ldb_client::stream::StreamOutcome;
use ldb_core::result::RequestSample;
use ldb_core::ttft_breakdown::{
    ClientTtft, TimedRequest, TtftBreakdown, from_histograms, from_timings,
};

/// The breakdown over `requests` (those whose first token counts for the
/// cell, with their samples): from llama.cpp's per-request timings when the
/// requests carry them, else from the histograms of the bracketing scrapes.
/// `None` when the engine gives neither (an OpenAI proxy, no `/metrics`).
pub(crate) fn cell_breakdown<'a>(
    start: Option<&Scrape>,
    end: Option<&Scrape>,
    requests: impl Iterator<Item = (&'a StreamOutcome, &'a RequestSample)>,
) -> Option<TtftBreakdown> {
    let requests: Vec<(&StreamOutcome, &RequestSample)> = requests
        .filter(|(o, s)| o.track.error().is_none() && s.first_token_s.is_some())
        .collect();
    if requests.iter().any(|(o, _)| o.timings.is_some()) {
        let timed: Vec<TimedRequest> = requests
            .iter()
            .filter_map(|(o, s)| {
                let t = o.timings.as_ref()?;
                Some(TimedRequest {
                    prompt_s: t.prompt_ms / 1e3,
                    predicted_s: t.predicted_ms / 1e3,
                    cache_n: t.cache_n,
                    client_ttft: s.ttft,
                })
            })
            .collect();
        return Some(from_timings(&timed));
    }
    let (start, end) = (start?, end?);
    if end.snap.latency.components.is_empty() {
        return None;
    }
    let ttfts: Vec<f64> = requests.iter().map(|(_, s)| s.ttft).collect();
    Some(from_histograms(
        &start.snap.latency,
        &end.snap.latency,
        ClientTtft::from_values(&ttfts),
    ))
}
