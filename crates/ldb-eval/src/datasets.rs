//! Parsers of the public evaluation datasets in their published formats,
//! turning records into task items (pure: the loader in `ldb-runner` reads
//! the files). The prompt wording around each record is ours.
//!
//! - GSM8K test (`test.jsonl`): `{"question", "answer"}` per line, the
//!   answer's final line `#### 72`; 1319 records. Items `gsm8k-0001`….
//! - MMLU-Pro (JSONL, one record per line): `question_id`, `question`,
//!   `options` (up to 10), `answer` (letter) and/or `answer_index`,
//!   `category`. Items `mmlupro-<question_id>`.
//! - GPQA diamond (`gpqa_diamond.csv`): columns `Question`, `Correct
//!   Answer`, `Incorrect Answer 1..3`, `Record ID`, `High-level domain`; the
//!   four options are shuffled deterministically per record id (the same
//!   order on every machine and run). Items `gpqa-<record id>`. A JSONL file
//!   with the same keys is accepted too.

use std::collections::HashMap;

use serde_json::Value;

use super::mc_letter::option_letter;
use super::sha256::sha256;
use super::task::TaskItem;

/// Which dataset a profile reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DatasetKind {
    /// GSM8K test split.
    Gsm8k,
    /// MMLU-Pro (the 1000-item stratified subset by default).
    MmluPro,
    /// GPQA diamond.
    GpqaDiamond,
}

impl DatasetKind {
    /// The dataset's name in results (`metadata.dataset`).
    pub fn name(self) -> &'static str {
        match self {
            DatasetKind::Gsm8k => "gsm8k_test",
            DatasetKind::MmluPro => "mmlu_pro_1000",
            DatasetKind::GpqaDiamond => "gpqa_diamond",
        }
    }
}

/// A parsed dataset file.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ParsedDataset {
    /// One item per record, in file order.
    pub items: Vec<TaskItem>,
    /// Options per multiple-choice item id (for the letter scorer).
    pub options: HashMap<String, usize>,
}

/// What the GSM8K prompt asks for after the question.
const GSM8K_SUFFIX: &str = "Work the problem out, then write the final numeric answer by itself \
     on the last line, with no units or other words.";

/// What the multiple-choice prompts ask for after the options.
const MC_SUFFIX: &str = "Think it through, then finish with a last line of the form \
     \"Answer: X\" where X is the letter of the single correct option.";

fn json_lines(text: &str, what: &str) -> Result<Vec<Value>, String> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|e| format!("{what}: line {}: not JSON ({e})", i + 1))
        })
        .collect()
}

fn field<'a>(v: &'a Value, key: &str, what: &str, line: usize) -> Result<&'a str, String> {
    v.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("{what}: record {line}: missing text field {key:?}"))
}

/// GSM8K test JSONL.
pub fn parse_gsm8k(text: &str) -> Result<ParsedDataset, String> {
    let rows = json_lines(text, "gsm8k")?;
    let mut items = Vec::with_capacity(rows.len());
    for (i, r) in rows.iter().enumerate() {
        let question = field(r, "question", "gsm8k", i + 1)?;
        let answer = field(r, "answer", "gsm8k", i + 1)?;
        let expected = answer
            .rsplit_once("####")
            .map(|(_, a)| a.trim().replace(',', ""))
            .filter(|a| !a.is_empty())
            .ok_or_else(|| format!("gsm8k: record {}: answer has no \"#### N\" line", i + 1))?;
        items.push(TaskItem {
            item_id: Some(format!("gsm8k-{:04}", i + 1)),
            category: None,
            prompt: format!("{}\n\n{GSM8K_SUFFIX}", question.trim()),
            expected_answer: Some(expected),
        });
    }
    Ok(ParsedDataset {
        items,
        options: HashMap::new(),
    })
}

fn mc_prompt(question: &str, options: &[String]) -> String {
    let mut p = question.trim().to_owned();
    p.push_str("\n\n");
    for (i, o) in options.iter().enumerate() {
        p.push_str(&format!("{}) {}\n", option_letter(i), o.trim()));
    }
    p.push('\n');
    p.push_str(MC_SUFFIX);
    p
}

/// MMLU-Pro JSONL.
pub fn parse_mmlu_pro(text: &str) -> Result<ParsedDataset, String> {
    let rows = json_lines(text, "mmlu-pro")?;
    let mut out = ParsedDataset::default();
    for (i, r) in rows.iter().enumerate() {
        let line = i + 1;
        let qid = match r.get("question_id") {
            Some(Value::Number(n)) => n.to_string(),
            Some(Value::String(s)) => s.clone(),
            _ => return Err(format!("mmlu-pro: record {line}: missing \"question_id\"")),
        };
        let question = field(r, "question", "mmlu-pro", line)?;
        let options: Vec<String> = r
            .get("options")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|o| o.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        if options.len() < 2 || options.len() > super::mc_letter::MAX_OPTIONS {
            return Err(format!(
                "mmlu-pro: record {line}: {} options (2 to 10 expected)",
                options.len()
            ));
        }
        let letter = match (
            r.get("answer").and_then(Value::as_str),
            r.get("answer_index"),
        ) {
            (Some(a), _) if a.len() == 1 => a.to_ascii_uppercase(),
            (_, Some(idx)) if idx.as_u64().is_some() => {
                option_letter(idx.as_u64().unwrap_or(0) as usize).to_string()
            }
            _ => return Err(format!("mmlu-pro: record {line}: no \"answer\" letter")),
        };
        if (letter.as_bytes()[0].wrapping_sub(b'A')) as usize >= options.len() {
            return Err(format!(
                "mmlu-pro: record {line}: answer {letter} outside its {} options",
                options.len()
            ));
        }
        let id = format!("mmlupro-{qid}");
        out.options.insert(id.clone(), options.len());
        out.items.push(TaskItem {
            item_id: Some(id),
            category: r.get("category").and_then(Value::as_str).map(str::to_owned),
            prompt: mc_prompt(question, &options),
            expected_answer: Some(letter),
        });
    }
    Ok(out)
}

/// A minimal RFC 4180 reader: quoted fields may hold commas, doubled quotes
/// and newlines (GPQA questions span lines).
pub fn parse_csv(text: &str) -> Result<Vec<Vec<String>>, String> {
    let mut rows = Vec::new();
    let mut row = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut chars = text.chars().peekable();
    let mut line = 1;
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                cur.push('"');
            }
            (true, '"') => quoted = false,
            (true, c) => {
                if c == '\n' {
                    line += 1;
                }
                cur.push(c);
            }
            (false, '"') if cur.is_empty() => quoted = true,
            (false, ',') => row.push(std::mem::take(&mut cur)),
            (false, '\r') => {}
            (false, '\n') => {
                line += 1;
                row.push(std::mem::take(&mut cur));
                if !(row.len() == 1 && row[0].is_empty()) {
                    rows.push(std::mem::take(&mut row));
                }
                row.clear();
            }
            (false, c) => cur.push(c),
        }
    }
    if quoted {
        return Err(format!("csv: unterminated quoted field (line {line})"));
    }
    if !cur.is_empty() || !row.is_empty() {
        row.push(cur);
        rows.push(row);
    }
    Ok(rows)
}

/// A deterministic permutation of `0..n` from a record id: Fisher–Yates
/// driven by splitmix64 seeded with the first 8 bytes of sha256(id).
pub fn shuffle_for(record_id: &str, n: usize) -> Vec<usize> {
    let digest = sha256(record_id.as_bytes());
    let mut state = u64::from_be_bytes(digest[..8].try_into().expect("8 bytes"));
    let mut next = move || {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let mut order: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        let j = (next() % (i as u64 + 1)) as usize;
        order.swap(i, j);
    }
    order
}

struct GpqaRecord {
    id: String,
    question: String,
    correct: String,
    wrong: [String; 3],
    domain: Option<String>,
}

fn gpqa_item(r: GpqaRecord, out: &mut ParsedDataset) {
    let mut all = vec![r.correct.trim().to_owned()];
    all.extend(r.wrong.iter().map(|w| w.trim().to_owned()));
    let order = shuffle_for(&r.id, all.len());
    let options: Vec<String> = order.iter().map(|&i| all[i].clone()).collect();
    let correct_at = order.iter().position(|&i| i == 0).unwrap_or(0);
    let id = format!("gpqa-{}", r.id);
    out.options.insert(id.clone(), options.len());
    out.items.push(TaskItem {
        item_id: Some(id),
        category: r.domain.filter(|d| !d.is_empty()),
        prompt: mc_prompt(&r.question, &options),
        expected_answer: Some(option_letter(correct_at).to_string()),
    });
}

/// GPQA diamond: the published CSV, or JSONL records with the same keys.
pub fn parse_gpqa(text: &str) -> Result<ParsedDataset, String> {
    let mut out = ParsedDataset::default();
    if text.trim_start().starts_with('{') {
        for (i, r) in json_lines(text, "gpqa")?.iter().enumerate() {
            let f = |k: &str| field(r, k, "gpqa", i + 1).map(str::to_owned);
            gpqa_item(
                GpqaRecord {
                    id: f("Record ID")?,
                    question: f("Question")?,
                    correct: f("Correct Answer")?,
                    wrong: [
                        f("Incorrect Answer 1")?,
                        f("Incorrect Answer 2")?,
                        f("Incorrect Answer 3")?,
                    ],
                    domain: f("High-level domain").ok(),
                },
                &mut out,
            );
        }
        return Ok(out);
    }
    let rows = parse_csv(text)?;
    let Some((header, records)) = rows.split_first() else {
        return Err("gpqa: empty file".to_owned());
    };
    let col = |name: &str| {
        header
            .iter()
            .position(|h| h.trim() == name)
            .ok_or_else(|| format!("gpqa: no {name:?} column"))
    };
    let (q, c, w1, w2, w3, id) = (
        col("Question")?,
        col("Correct Answer")?,
        col("Incorrect Answer 1")?,
        col("Incorrect Answer 2")?,
        col("Incorrect Answer 3")?,
        col("Record ID")?,
    );
    let domain = col("High-level domain").ok();
    for (i, r) in records.iter().enumerate() {
        let get = |k: usize| {
            r.get(k)
                .cloned()
                .ok_or_else(|| format!("gpqa: record {}: too few columns", i + 1))
        };
        gpqa_item(
            GpqaRecord {
                id: get(id)?,
                question: get(q)?,
                correct: get(c)?,
                wrong: [get(w1)?, get(w2)?, get(w3)?],
                domain: domain.and_then(|d| r.get(d).cloned()),
            },
            &mut out,
        );
    }
    Ok(out)
}

/// Parse `text` as `kind`.
pub fn parse(kind: DatasetKind, text: &str) -> Result<ParsedDataset, String> {
    match kind {
        DatasetKind::Gsm8k => parse_gsm8k(text),
        DatasetKind::MmluPro => parse_mmlu_pro(text),
        DatasetKind::GpqaDiamond => parse_gpqa(text),
    }
}

/// Indices of `n` items spread evenly over `total` (index i·total/n);
/// all of them when `n` is 0 or at least `total`.
pub fn stride_select(total: usize, n: usize) -> Vec<usize> {
    if n == 0 || n >= total {
        return (0..total).collect();
    }
    (0..n).map(|i| i * total / n).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gsm8k_records() {
        let text = "{\"question\": \"Tom has 3 apples and buys 1,200 more. How many?\", \"answer\": \"3 + 1200 = <<3+1200=1203>>1203\\n#### 1,203\"}\n\n{\"question\": \"q2\", \"answer\": \"x\\n#### -4\"}\n";
        let d = parse_gsm8k(text).unwrap();
        assert_eq!(d.items.len(), 2);
        assert_eq!(d.items[0].item_id.as_deref(), Some("gsm8k-0001"));
        assert_eq!(d.items[0].expected_answer.as_deref(), Some("1203"));
        assert!(d.items[0].prompt.starts_with("Tom has 3 apples"));
        assert_eq!(d.items[1].expected_answer.as_deref(), Some("-4"));
        let e = parse_gsm8k("{\"question\": \"q\", \"answer\": \"no marker\"}").unwrap_err();
        assert!(e.contains("record 1") && e.contains("####"), "{e}");
        assert!(parse_gsm8k("not json").unwrap_err().contains("line 1"));
    }

    #[test]
    fn mmlu_pro_records() {
        let text = r#"{"question_id": 70, "question": "Which?", "options": ["a", "b", "c"], "answer": "C", "answer_index": 2, "category": "law"}
{"question_id": 71, "question": "Other?", "options": ["a", "b", "c", "d"], "answer_index": 1, "category": "math"}"#;
        let d = parse_mmlu_pro(text).unwrap();
        assert_eq!(d.items[0].item_id.as_deref(), Some("mmlupro-70"));
        assert_eq!(d.items[0].expected_answer.as_deref(), Some("C"));
        assert_eq!(d.items[0].category.as_deref(), Some("law"));
        assert!(d.items[0].prompt.contains("A) a\nB) b\nC) c\n"));
        assert_eq!(d.items[1].expected_answer.as_deref(), Some("B"));
        assert_eq!(d.options["mmlupro-71"], 4);
        let bad = r#"{"question_id": 1, "question": "q", "options": ["a", "b"], "answer": "D"}"#;
        assert!(parse_mmlu_pro(bad).unwrap_err().contains("outside"));
    }

    #[test]
    fn gpqa_csv_with_multiline_quoted_fields() {
        let text = "Pre-Revision Question,Question,Correct Answer,Incorrect Answer 1,Incorrect Answer 2,Incorrect Answer 3,Record ID,High-level domain\n\
x,\"Two lines,\nwith \"\"quotes\"\"\",right,w1,w2,w3,recA,Physics\n\
y,Short?,R,W1,W2,W3,recB,Chemistry\n";
        let d = parse_gpqa(text).unwrap();
        assert_eq!(d.items.len(), 2);
        let it = &d.items[0];
        assert_eq!(it.item_id.as_deref(), Some("gpqa-recA"));
        assert!(
            it.prompt.starts_with("Two lines,\nwith \"quotes\""),
            "{}",
            it.prompt
        );
        assert_eq!(it.category.as_deref(), Some("Physics"));
        // the expected letter points at the correct answer after shuffling
        let letter = it.expected_answer.clone().unwrap();
        assert!(
            it.prompt.contains(&format!("{letter}) right\n")),
            "{}",
            it.prompt
        );
        // deterministic: parsing again gives the same order
        assert_eq!(parse_gpqa(text).unwrap(), d);
    }

    #[test]
    fn shuffles_differ_by_record_and_are_permutations() {
        let a = shuffle_for("recA", 4);
        let mut s = a.clone();
        s.sort_unstable();
        assert_eq!(s, vec![0, 1, 2, 3]);
        assert_eq!(a, shuffle_for("recA", 4));
        let distinct: std::collections::HashSet<Vec<usize>> = (0..50)
            .map(|i| shuffle_for(&format!("rec{i}"), 4))
            .collect();
        assert!(distinct.len() > 10, "{distinct:?}");
        // the correct answer does not always land on the same letter
        let firsts: std::collections::HashSet<usize> = (0..50)
            .map(|i| {
                shuffle_for(&format!("rec{i}"), 4)
                    .iter()
                    .position(|&x| x == 0)
                    .unwrap()
            })
            .collect();
        assert_eq!(firsts.len(), 4);
    }

    #[test]
    fn stride_selection() {
        assert_eq!(stride_select(10, 3), vec![0, 3, 6]);
        assert_eq!(stride_select(1319, 4), vec![0, 329, 659, 989]);
        assert_eq!(stride_select(5, 0).len(), 5);
        assert_eq!(stride_select(5, 9).len(), 5);
    }
}
