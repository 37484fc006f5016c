//! Profiles, TOML profile files and dataset loading, on small files the
//! tests write in the published formats (downloads only from a loopback
//! server, in `download_tests`).

use std::path::Path;

use ldb_eval::score::{Output, ScoreLabel, ScoreSource};

use super::*;

fn req(name: &str) -> ProfileRequest {
    ProfileRequest {
        name: Some(name.to_owned()),
        ..Default::default()
    }
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn answer(content: &str) -> Output<'_> {
    Output {
        reasoning: "",
        content,
        finish_reason: Some("stop"),
    }
}

#[test]
fn builtins_score_their_own_answers() {
    let t = load_profile(&req("lamps")).unwrap();
    assert_eq!(t.profile, "toggle-lamps");
    let s = t.scorer.clone().unwrap();
    assert!(s.score(&t.items[0], &answer("so...\n23")).correct());
    assert!(!s.score(&t.items[0], &answer("24")).correct());
    let t = load_profile(&req("needle-32k")).unwrap();
    assert_eq!(t.profile, "needle-32000");
    let expected = t.items[0].expected_answer.clone().unwrap();
    assert!(
        t.scorer
            .unwrap()
            .score(&t.items[0], &answer(&expected))
            .correct()
    );
    assert_eq!(load_profile(&req("needle")).unwrap().profile, "needle-8000");
}

#[test]
fn reference_profiles_name_our_equivalents() {
    for (name, ours) in [
        ("estonia", "needle"),
        ("estonia-long", "needle"),
        ("hotel", "toggle-lamps"),
        ("lights", "toggle-lamps"),
        ("hotel-lights", "toggle-lamps"),
        ("lavd", "needle"),
        ("ledger-lavd", "needle"),
        ("lavd-test", "needle"),
    ] {
        let e = load_profile(&req(name)).unwrap_err().0;
        assert!(e.contains(ours) && !e.contains('\n'), "{name}: {e}");
    }
    let e = load_profile(&req("nope")).unwrap_err().0;
    assert!(
        e.contains("unknown test profile") && e.contains("gsm8k"),
        "{e}"
    );
}

const GSM: &str = "{\"question\": \"q1\", \"answer\": \"w\\n#### 5\"}\n{\"question\": \"q2\", \"answer\": \"w\\n#### 6\"}\n{\"question\": \"q3\", \"answer\": \"w\\n#### 7\"}\n{\"question\": \"q4\", \"answer\": \"w\\n#### 8\"}\n";

#[test]
fn dataset_file_is_read_as_is_with_its_sha_and_count() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "mini.jsonl", GSM);
    let r = ProfileRequest {
        name: Some("gsm-8k".into()),
        dataset_file: Some(f),
        runs: Some(2),
        cache_dir: Some(dir.path().join("empty")),
        ..Default::default()
    };
    let t = load_profile(&r).unwrap();
    let info = t.dataset.clone().unwrap();
    assert_eq!(info.items_total, 4);
    assert_eq!(info.source, "dataset-file");
    assert_eq!(info.sha256, ldb_eval::sha256::sha256_hex(GSM.as_bytes()));
    assert!(
        info.note
            .contains("4 records instead of the published 1319"),
        "{}",
        info.note
    );
    // stride selection: items 0 and 2
    let ids: Vec<_> = t.items.iter().map(|i| i.item_id.clone().unwrap()).collect();
    assert_eq!(ids, vec!["gsm8k-0001", "gsm8k-0003"]);
    assert!(t.one_item_per_run);
    assert_eq!(t.defaults.runs, Some(2));
    let s = t.scorer.unwrap();
    assert_eq!(s.name(), "dataset_gsm8k");
    assert!(s.score(&t.items[1], &answer("7")).correct());
}

#[test]
fn cached_file_must_match_the_pin_and_missing_files_say_how() {
    let dir = tempfile::tempdir().unwrap();
    let r = ProfileRequest {
        name: Some("gsm8k".into()),
        cache_dir: Some(dir.path().to_path_buf()),
        ..Default::default()
    };
    let e = load_profile(&r).unwrap_err().0;
    assert!(
        e.contains("not cached")
            && e.contains("--dataset-file")
            && e.contains("grade-school-math")
            && e.contains(&dir.path().join("gsm8k_test.jsonl").display().to_string()),
        "{e}"
    );
    assert!(!e.contains('\n'));
    // not the published file: its sha256 differs from the pin
    write(dir.path(), "gsm8k_test.jsonl", GSM);
    let e = load_profile(&r).unwrap_err().0;
    assert!(
        e.contains("does not match the pinned 3730d312") && !e.contains('\n'),
        "{e}"
    );
    // GPQA is published inside a zip: the error gives the manual step
    for allow_download in [false, true] {
        let e = load_profile(&ProfileRequest {
            name: Some("gpqa".into()),
            cache_dir: Some(dir.path().to_path_buf()),
            allow_download,
            ..Default::default()
        })
        .unwrap_err()
        .0;
        assert!(
            e.contains("idavidrein/gpqa")
                && e.contains("dataset/gpqa_diamond.csv")
                && e.contains("gpqa_diamond.csv")
                && !e.contains('\n'),
            "{e}"
        );
    }
}

#[test]
fn gpqa_and_mmlu_files_load_with_letter_scoring() {
    let dir = tempfile::tempdir().unwrap();
    let csv = "Question,Correct Answer,Incorrect Answer 1,Incorrect Answer 2,Incorrect Answer 3,Record ID,High-level domain\nWhat?,yes,no,maybe,never,rec7,Biology\n";
    let r = ProfileRequest {
        name: Some("gpqa".into()),
        dataset_file: Some(write(dir.path(), "g.csv", csv)),
        ..Default::default()
    };
    let t = load_profile(&r).unwrap();
    assert_eq!(t.items[0].item_id.as_deref(), Some("gpqa-rec7"));
    assert_eq!(t.items[0].category.as_deref(), Some("Biology"));
    let letter = t.items[0].expected_answer.clone().unwrap();
    let s = t.scorer.unwrap();
    assert!(
        s.score(&t.items[0], &answer(&format!("Answer: {letter}")))
            .correct()
    );
    // E is not an option of a four-option item
    let r = s.score(&t.items[0], &answer("Answer: E"));
    assert_eq!(
        (r.label, r.detail.as_str()),
        (ScoreLabel::Fail, "unparseable")
    );
    let jsonl = r#"{"question_id": 9, "question": "Q", "options": ["a","b","c","d","e"], "answer": "E", "category": "law"}"#;
    let r = ProfileRequest {
        name: Some("mmlupro".into()),
        dataset_file: Some(write(dir.path(), "m.jsonl", jsonl)),
        ..Default::default()
    };
    let t = load_profile(&r).unwrap();
    assert_eq!(t.profile, "mmlu-pro");
    assert!(
        t.scorer
            .unwrap()
            .score(&t.items[0], &answer("Answer: E"))
            .correct()
    );
}

#[test]
fn toml_profiles() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(
        dir.path(),
        "mine.toml",
        r#"
title = "My puzzle"
prompt = "What is 6 times 7?"
system_prompt = "Be brief."
[scorer]
kind = "numeric_exact"
expected = "42"
[request]
chat_template_kwargs = { enable_thinking = false }
[defaults]
max_tokens = 0
temperature = 0.6
concurrency = 4
runs = 8
no_prefill_scout = true
score_source = "content"
"#,
    );
    let t = load_profile(&ProfileRequest {
        file: Some(f),
        ..Default::default()
    })
    .unwrap();
    assert_eq!(t.profile, "mine");
    assert_eq!(t.title, "My puzzle");
    assert_eq!(t.system_prompt.as_deref(), Some("Be brief."));
    assert_eq!(t.items[0].expected_answer.as_deref(), Some("42"));
    assert_eq!(t.defaults.max_tokens, Some(0));
    assert_eq!(t.defaults.runs, Some(8));
    assert!(t.defaults.no_prefill_scout);
    assert_eq!(t.defaults.score_source, Some(ScoreSource::Content));
    assert_eq!(
        t.request_overrides["chat_template_kwargs"]["enable_thinking"],
        serde_json::Value::Bool(false)
    );
    assert!(
        t.scorer
            .unwrap()
            .score(&t.items[0], &answer("It is 42."))
            .correct()
    );

    let g = write(
        dir.path(),
        "gen.toml",
        "generate = \"needle\"\ngenerate_tokens = 2000\n",
    );
    let t = load_profile(&ProfileRequest {
        file: Some(g),
        ..Default::default()
    })
    .unwrap();
    assert_eq!(t.profile, "gen");
    assert!(t.scorer.is_some());
}

#[test]
fn toml_mistakes_are_one_line_errors_naming_key_and_file() {
    let dir = tempfile::tempdir().unwrap();
    for (text, want) in [
        ("prompt = \"x\"\npromt = \"y\"\n", "unknown key \"promt\""),
        (
            "prompt = \"x\"\n[defaults]\nmax_token = 5\n",
            "unknown key defaults.\"max_token\"",
        ),
        (
            "prompt = \"x\"\n[scorer]\nkind = \"regex\"\nregex = \"a\"\n",
            "unknown key scorer.\"regex\"",
        ),
        ("prompt = \"x\"\ndataset = \"gsm8k\"\n", "exactly one of"),
        (
            "prompt = \"x\"\n[scorer]\nkind = \"vibes\"\n",
            "unknown scorer kind",
        ),
        ("prompt = \"x\"\n[defaults]\nruns = -1\n", "defaults.runs"),
        ("prompt = [unclosed\n", "invalid TOML"),
    ] {
        let f = write(dir.path(), "bad.toml", text);
        let e = load_profile(&ProfileRequest {
            file: Some(f.clone()),
            ..Default::default()
        })
        .unwrap_err()
        .0;
        assert!(e.contains(want), "{text:?}: {e}");
        assert!(e.starts_with(&f.display().to_string()), "{e}");
        assert!(!e.contains('\n'), "{e}");
    }
}
