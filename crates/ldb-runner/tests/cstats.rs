//! The completion-stats runner with a dataset-like task (one item per run)
//! against the simulator's scripted answers: accuracy, categories and the
//! stop when the items run out.

mod common;

use std::sync::{Arc, Mutex};

use ldb_eval::cstats::{CsDocument, CsEvent, Phase};
use ldb_eval::regex_scorer::RegexScorer;
use ldb_eval::score::ScoreSource;
use ldb_eval::task::{DatasetInfo, Task, TaskItem};
use ldb_runner::cstats::{CsConfig, CsHooks, run_completion_stats};
use ldb_sim::ScriptedAnswer;
use tokio_util::sync::CancellationToken;

fn item(i: usize, category: &str) -> TaskItem {
    TaskItem {
        item_id: Some(format!("item-{i}")),
        category: Some(category.to_owned()),
        prompt: format!("Question {i}?"),
        expected_answer: Some("yes".into()),
    }
}

#[tokio::test]
async fn a_dataset_task_stops_when_its_items_run_out() {
    let _serial = common::SERIAL.lock().await;
    let sim = common::start(common::FLAT, |s| {
        s.output.answers = vec![
            ScriptedAnswer {
                content: "ANSWER: yes".into(),
                completion_tokens: 20,
                ..ScriptedAnswer::default()
            },
            ScriptedAnswer {
                content: "ANSWER: no".into(),
                completion_tokens: 30,
                ..ScriptedAnswer::default()
            },
        ];
    })
    .await;
    let mut task = Task::single_prompt(
        String::new(),
        "profile:test".into(),
        Some(Arc::new(
            RegexScorer::new(r"\byes\b", ScoreSource::FinalAnswer).unwrap(),
        )),
    );
    task.profile = "test".into();
    task.items = vec![item(0, "a"), item(1, "a"), item(2, "b"), item(3, "b")];
    task.one_item_per_run = true;
    task.dataset = Some(DatasetInfo {
        name: "four".into(),
        items_total: 10,
        sha256: "00".repeat(32),
        ..DatasetInfo::default()
    });
    let cfg = CsConfig {
        base: common::config(&sim, &[1], &[0], 1.0),
        task,
        max_tokens: None,
        fixed_concurrency: None,
        requested_runs: 0,
        min_results: 4,
        levels: vec![1, 2, 4],
        probe_waves: 1,
        min_improvement: 0.0,
        patience: 5,
        auto_stop: true,
        correct_regex: r"\byes\b".into(),
        score_source: ScoreSource::FinalAnswer,
        save_text: false,
        prefill_scout: false,
        temperature: Some(0.0),
        top_p: None,
    };
    let saves: Arc<Mutex<Vec<CsDocument>>> = Arc::default();
    let kept = saves.clone();
    let events: Arc<Mutex<Vec<CsEvent>>> = Arc::default();
    let seen = events.clone();
    let hooks = CsHooks {
        stop: CancellationToken::new(),
        save: Box::new(move |d| kept.lock().unwrap().push(d.clone())),
        progress: Arc::new(move |e| seen.lock().unwrap().push(e)),
        hardware: None,
        p2p: None,
    };
    let out = run_completion_stats(cfg, hooks).await.expect("runs");
    sim.shutdown().await;
    let doc = out.doc;
    assert!(!out.interrupted);
    // C=1 takes item 0, C=2 items 1 and 2, C=4 only item 3 is left
    assert_eq!(doc.runs.len(), 4, "one run per item");
    let mut ids: Vec<String> = doc.runs.iter().filter_map(|r| r.item_id.clone()).collect();
    ids.sort();
    assert_eq!(ids, ["item-0", "item-1", "item-2", "item-3"]);
    assert!(doc.runs.iter().all(|r| r.phase == Phase::Probe));
    let acc = doc.accuracy.as_ref().expect("a dataset task has accuracy");
    assert!(acc.dataset_exhausted);
    assert_eq!(
        (acc.items_total, acc.items_selected, acc.scored, acc.correct),
        (10, 4, 4, 2)
    );
    assert_eq!(acc.accuracy, 0.5);
    assert!(acc.wilson95_low < 0.5 && acc.wilson95_high > 0.5);
    assert_eq!(doc.category_summaries.len(), 2);
    assert_eq!(doc.all_summary.completion_tokens.unwrap().avg, 25.0);
    assert_eq!(doc.metadata.dataset.as_deref(), Some("four"));
    assert_eq!(doc.metadata.max_tokens, None);
    assert!(doc.metadata.max_tokens_omitted);
    // saved after every level and at the end
    assert!(saves.lock().unwrap().len() >= 3);
    let ev = events.lock().unwrap();
    assert_eq!(
        ev.iter().filter(|e| matches!(e, CsEvent::Run(_))).count(),
        4
    );
    // every batch ends by clearing the live view's in-flight table
    let last_active = ev.iter().rev().find_map(|e| match e {
        CsEvent::Active(a) => Some(a.total),
        _ => None,
    });
    assert_eq!(last_active, Some(0));
}
