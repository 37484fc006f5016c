//! Snapshot tests of the completion-stats live view: the requests in
//! flight, the hardware panel beside them, and the row limit.

use ldb_eval::cstats::{ActiveSet, ActiveStream, CsEvent, CsLive, CsRun, Phase, StreamStatus};
use ldb_tui::demo;
use ratatui::Terminal;
use ratatui::backend::TestBackend;

fn frame(v: &CsLive, w: u16, h: u16) -> String {
    let mut term = Terminal::new(TestBackend::new(w, h)).expect("test backend");
    term.draw(|f| ldb_tui::cstats::render(f, f.area(), v))
        .expect("draw");
    term.backend().to_string()
}

fn finished(i: usize, tokens: u64, label: &str, answer: &str) -> CsRun {
    CsRun {
        run_index: i,
        phase: Phase::Collect,
        concurrency: 4,
        ok: true,
        correct: Some(label != "fail"),
        completion_tokens: tokens,
        prompt_tokens: Some(180),
        elapsed: 12.5,
        gen_elapsed: 12.0,
        ttft: Some(0.5),
        time_to_second_token: Some(0.52),
        gen_tok_s: tokens as f64 / 12.0,
        e2e_tok_s: tokens as f64 / 12.5,
        finish_reason: Some("stop".into()),
        final_answer: answer.into(),
        score_label: Some(label.into()),
        score_detail: String::new(),
        parsed_answer: Some(answer.into()),
        output_excerpt: String::new(),
        output_text: String::new(),
        reasoning_text: String::new(),
        content_text: String::new(),
        error: None,
        hit_max_tokens: false,
        estimated_tokens: false,
        cancelled: false,
        item_id: Some(format!("gsm8k-{i:04}")),
        category: None,
        expected_answer: Some("18".into()),
        sent_at: 0.0,
        first_token_at: Some(0.5),
        ended_at: 12.5,
    }
}

fn stream(i: usize, status: StreamStatus, chunks: u64, latest: &str) -> ActiveStream {
    let since_first = if chunks > 0 { 2.0 + i as f64 } else { 0.0 };
    ActiveStream {
        run_index: i,
        item_id: Some(format!("gsm8k-{i:04}")),
        status,
        elapsed: 2.5 + i as f64,
        since_first,
        chunks,
        chars: chunks * 3,
        latest: latest.into(),
    }
}

/// A collect batch at C=4: two answers in, four requests in every state.
fn view() -> CsLive {
    let mut v = CsLive::new("GSM8K Accuracy");
    v.apply(CsEvent::Batch {
        phase: Phase::Collect,
        concurrency: 4,
        count: 8,
    });
    v.apply(CsEvent::Run(Box::new(finished(0, 240, "pass", "18"))));
    v.apply(CsEvent::Run(Box::new(finished(1, 310, "fail", "17"))));
    v.apply(CsEvent::Active(Box::new(ActiveSet::new(vec![
        stream(
            2,
            StreamStatus::Streaming,
            180,
            "so she earns 9 * 2 = 18 dollars",
        ),
        stream(3, StreamStatus::FirstToken, 1, "Let"),
        stream(4, StreamStatus::WaitingFirst, 0, ""),
        stream(5, StreamStatus::Connecting, 0, ""),
    ]))));
    v
}

#[test]
fn active_streams_without_hardware() {
    insta::assert_snapshot!(frame(&view(), 110, 40));
}

#[test]
fn active_streams_beside_the_hardware_panel_wide() {
    let mut v = view();
    v.hardware = Some(demo::hardware());
    insta::assert_snapshot!(frame(&v, 150, 40));
}

#[test]
fn active_streams_beside_the_hardware_panel_narrow() {
    let mut v = view();
    v.hardware = Some(demo::hardware());
    insta::assert_snapshot!(frame(&v, 110, 40));
}

#[test]
fn many_streams_show_the_oldest_and_the_count() {
    let mut v = view();
    v.apply(CsEvent::Active(Box::new(ActiveSet::new(
        (2..42)
            .map(|i| stream(i, StreamStatus::Streaming, 50, "working"))
            .collect(),
    ))));
    let text = frame(&v, 110, 36);
    assert!(text.contains("Active Streams (showing 14/40)"), "{text}");
    assert!(text.contains("40 streams"), "{text}");
    insta::assert_snapshot!(text);
}
