//! `--profile-file FILE`: a task described in TOML (keys in
//! docs/completion-stats.md). Every key is checked: a misspelt key is an
//! error naming it and the file, never silently ignored.

use std::path::Path;
use std::sync::Arc;

use ldb_eval::mc_letter::McLetterScorer;
use ldb_eval::numeric::{Gsm8kScorer, NumericExactScorer};
use ldb_eval::regex_scorer::RegexScorer;
use ldb_eval::score::{ScoreSource, Scorer};
use ldb_eval::task::{Task, TaskDefaults};
use serde_json::{Map, Value};
use toml::Table;

use super::{ProfileRequest, TaskError, dataset_kind, dataset_task, needle_task};

const TOP_KEYS: &[&str] = &[
    "name",
    "title",
    "description",
    "prompt",
    "prompt_file",
    "dataset",
    "generate",
    "generate_tokens",
    "system_prompt",
    "scorer",
    "request",
    "defaults",
];
const SCORER_KEYS: &[&str] = &["kind", "pattern", "expected", "tolerance"];
const DEFAULT_KEYS: &[&str] = &[
    "max_tokens",
    "temperature",
    "concurrency",
    "runs",
    "no_prefill_scout",
    "score_source",
];

struct Ctx<'a> {
    file: &'a Path,
}

impl Ctx<'_> {
    fn err(&self, msg: impl std::fmt::Display) -> TaskError {
        TaskError(format!("{}: {msg}", self.file.display()))
    }

    fn check_keys(&self, table: &Table, allowed: &[&str], section: &str) -> Result<(), TaskError> {
        for k in table.keys() {
            if !allowed.contains(&k.as_str()) {
                return Err(self.err(format!("unknown key {section}{k:?}")));
            }
        }
        Ok(())
    }

    fn string(&self, t: &Table, key: &str, section: &str) -> Result<Option<String>, TaskError> {
        match t.get(key) {
            None => Ok(None),
            Some(toml::Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(self.err(format!("{section}{key} must be a string"))),
        }
    }

    fn uint(&self, t: &Table, key: &str, section: &str) -> Result<Option<u64>, TaskError> {
        match t.get(key) {
            None => Ok(None),
            Some(toml::Value::Integer(n)) if *n >= 0 => Ok(Some(*n as u64)),
            Some(_) => Err(self.err(format!("{section}{key} must be a whole number ≥ 0"))),
        }
    }

    fn float(&self, t: &Table, key: &str, section: &str) -> Result<Option<f64>, TaskError> {
        match t.get(key) {
            None => Ok(None),
            Some(toml::Value::Float(x)) => Ok(Some(*x)),
            Some(toml::Value::Integer(n)) => Ok(Some(*n as f64)),
            Some(_) => Err(self.err(format!("{section}{key} must be a number"))),
        }
    }

    fn table<'t>(&self, t: &'t Table, key: &str) -> Result<Option<&'t Table>, TaskError> {
        match t.get(key) {
            None => Ok(None),
            Some(toml::Value::Table(x)) => Ok(Some(x)),
            Some(_) => Err(self.err(format!("{key} must be a table ([{key}])"))),
        }
    }
}

fn toml_to_json(v: &toml::Value) -> Value {
    match v {
        toml::Value::String(s) => Value::String(s.clone()),
        toml::Value::Integer(n) => Value::from(*n),
        toml::Value::Float(x) => {
            serde_json::Number::from_f64(*x).map_or(Value::Null, Value::Number)
        }
        toml::Value::Boolean(b) => Value::Bool(*b),
        toml::Value::Datetime(d) => Value::String(d.to_string()),
        toml::Value::Array(a) => Value::Array(a.iter().map(toml_to_json).collect()),
        toml::Value::Table(t) => Value::Object(
            t.iter()
                .map(|(k, v)| (k.clone(), toml_to_json(v)))
                .collect(),
        ),
    }
}

fn defaults(c: &Ctx<'_>, t: Option<&Table>) -> Result<TaskDefaults, TaskError> {
    let Some(t) = t else {
        return Ok(TaskDefaults::default());
    };
    c.check_keys(t, DEFAULT_KEYS, "defaults.")?;
    let s = "defaults.";
    let score_source = match c.string(t, "score_source", s)? {
        None => None,
        Some(v) => Some(ScoreSource::parse(&v).ok_or_else(|| {
            c.err(format!(
                "defaults.score_source {v:?} (use final_answer, content or output)"
            ))
        })?),
    };
    let no_prefill_scout = match t.get("no_prefill_scout") {
        None => false,
        Some(toml::Value::Boolean(b)) => *b,
        Some(_) => return Err(c.err("defaults.no_prefill_scout must be true or false")),
    };
    Ok(TaskDefaults {
        max_tokens: c.uint(t, "max_tokens", s)?,
        temperature: c.float(t, "temperature", s)?,
        concurrency: c.uint(t, "concurrency", s)?.map(|n| n as usize),
        runs: c.uint(t, "runs", s)?.map(|n| n as usize),
        no_prefill_scout,
        score_source,
    })
}

fn scorer(
    c: &Ctx<'_>,
    t: Option<&Table>,
    source: ScoreSource,
) -> Result<Option<Arc<dyn Scorer>>, TaskError> {
    let Some(t) = t else {
        return Ok(None);
    };
    c.check_keys(t, SCORER_KEYS, "scorer.")?;
    let kind = c
        .string(t, "kind", "scorer.")?
        .ok_or_else(|| c.err("[scorer] needs kind"))?;
    let s: Arc<dyn Scorer> = match kind.as_str() {
        "none" => return Ok(None),
        "regex" => {
            let pattern = c
                .string(t, "pattern", "scorer.")?
                .ok_or_else(|| c.err("scorer kind regex needs pattern"))?;
            Arc::new(RegexScorer::new(&pattern, source).map_err(|e| c.err(e))?)
        }
        "numeric_exact" => Arc::new(NumericExactScorer {
            expected: c.string(t, "expected", "scorer.")?,
            source,
            tolerance: c.float(t, "tolerance", "scorer.")?.unwrap_or(0.0).abs(),
        }),
        "dataset_gsm8k" => Arc::new(Gsm8kScorer),
        "dataset_mc_letter" => Arc::new(McLetterScorer::default()),
        other => {
            return Err(c.err(format!(
                "unknown scorer kind {other:?} (regex, numeric_exact, dataset_gsm8k, dataset_mc_letter, none)"
            )));
        }
    };
    Ok(Some(s))
}

/// Read and check a TOML profile.
pub fn load(file: &Path, request: &ProfileRequest) -> Result<Task, TaskError> {
    let c = Ctx { file };
    let top = read_top(&c)?;
    c.check_keys(&top, TOP_KEYS, "")?;
    let defaults = defaults(&c, c.table(&top, "defaults")?)?;
    let source = defaults.score_source.unwrap_or_default();
    let scorer = scorer(&c, c.table(&top, "scorer")?, source)?;
    let sources = ["prompt", "prompt_file", "dataset", "generate"]
        .iter()
        .filter(|k| top.contains_key(**k))
        .count();
    if sources != 1 {
        return Err(c.err("give exactly one of prompt, prompt_file, dataset, generate"));
    }
    let name = match c.string(&top, "name", "")? {
        Some(n) => n,
        None => file
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default(),
    };
    let mut task = if let Some(ds) = c.string(&top, "dataset", "")? {
        let kind = dataset_kind(&ds).ok_or_else(|| {
            c.err(format!(
                "unknown dataset {ds:?} (gsm8k, mmlu-pro, gpqa-diamond)"
            ))
        })?;
        let mut t = dataset_task(kind, request)?;
        // a file's own scorer replaces the dataset's only when given
        if let Some(s) = scorer.clone() {
            t.scorer = Some(s);
        }
        t
    } else if let Some(g) = c.string(&top, "generate", "")? {
        if g != "needle" {
            return Err(c.err(format!("unknown generator {g:?} (needle)")));
        }
        let tokens = c
            .uint(&top, "generate_tokens", "")?
            .unwrap_or(ldb_eval::builtin::NEEDLE_DEFAULT_TOKENS as u64);
        let mut t = needle_task(tokens as usize);
        if let Some(s) = scorer.clone() {
            t.scorer = Some(s);
        }
        t
    } else {
        prompt_task(&c, &top, scorer)?
    };
    if top.contains_key("generate_tokens") && !top.contains_key("generate") {
        return Err(c.err("generate_tokens needs generate"));
    }
    task.profile = name;
    describe(&c, &top, &mut task)?;
    // the file's defaults override the generator's or dataset's, key by key
    task.defaults = merge_defaults(defaults, task.defaults.clone());
    Ok(task)
}

/// The file's text parsed as one TOML table; a parse error in one line.
fn read_top(c: &Ctx<'_>) -> Result<Table, TaskError> {
    let text = std::fs::read_to_string(c.file).map_err(|e| c.err(e))?;
    text.parse().map_err(|e: toml::de::Error| {
        let why = e.message().split_whitespace().collect::<Vec<_>>().join(" ");
        c.err(format!("invalid TOML: {why}"))
    })
}

/// A one-prompt task from `prompt`, or from `prompt_file` (relative to the
/// profile's folder); a scorer's `expected` becomes the item's answer.
fn prompt_task(
    c: &Ctx<'_>,
    top: &Table,
    scorer: Option<Arc<dyn Scorer>>,
) -> Result<Task, TaskError> {
    let file = c.file;
    let (prompt, origin) = match c.string(top, "prompt", "")? {
        Some(p) => (p, format!("profile-file:{}", file.display())),
        None => {
            let rel = c.string(top, "prompt_file", "")?.unwrap_or_default();
            let path = file.parent().unwrap_or(Path::new(".")).join(&rel);
            let p = std::fs::read_to_string(&path)
                .map_err(|e| c.err(format!("prompt_file {}: {e}", path.display())))?;
            (p, format!("file:{}", path.display()))
        }
    };
    if prompt.trim().is_empty() {
        return Err(c.err("the prompt is empty"));
    }
    let mut t = Task::single_prompt(prompt, origin, scorer);
    if let Some(e) = t.scorer.as_ref().and(c.string(
        c.table(top, "scorer")?.unwrap_or(&Table::new()),
        "expected",
        "scorer.",
    )?) {
        t.items[0].expected_answer = Some(e);
    }
    Ok(t)
}

/// The file's title, description, system prompt and request overrides.
fn describe(c: &Ctx<'_>, top: &Table, task: &mut Task) -> Result<(), TaskError> {
    if let Some(t) = c.string(top, "title", "")? {
        task.title = t;
    }
    if let Some(d) = c.string(top, "description", "")? {
        task.description = d;
    }
    task.system_prompt = c.string(top, "system_prompt", "")?;
    if let Some(req) = c.table(top, "request")? {
        let mut m = Map::new();
        for (k, v) in req {
            m.insert(k.clone(), toml_to_json(v));
        }
        task.request_overrides = m;
    }
    Ok(())
}

/// Each default the file gives wins over the task's own (`base`).
fn merge_defaults(d: TaskDefaults, base: TaskDefaults) -> TaskDefaults {
    TaskDefaults {
        max_tokens: d.max_tokens.or(base.max_tokens),
        temperature: d.temperature.or(base.temperature),
        concurrency: d.concurrency.or(base.concurrency),
        runs: d.runs.or(base.runs),
        no_prefill_scout: d.no_prefill_scout || base.no_prefill_scout,
        score_source: d.score_source.or(base.score_source),
    }
}
