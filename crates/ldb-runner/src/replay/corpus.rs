//! `--prompt-corpus FILE`: the file checked before the run (hashed whole,
//! its opening cut into chunks; a missing, empty or too short corpus is one
//! line and exit 2), then, with the server up, every chunk counted once with
//! its tokenizer so the builder knows each chunk's tokens
//! (`ldb_core::trace::corpus`).

use std::io::Read;
use std::path::Path;
use std::sync::Arc;

use futures_util::StreamExt;
use ldb_client::discovery::{Discovery, TokenizeKind};
use ldb_core::replay::PromptCorpusInfo;
use ldb_core::trace::corpus::{CorpusPool, MAX_CHUNKS, MIN_CHUNKS, TextSource, cut};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::check::{count_chat, user};
use crate::ctx::RunCtx;
use crate::prompts::real_prompt_tokens;

/// Bytes of the corpus's opening the chunks are cut from (the whole file
/// is hashed).
const OPENING_BYTES: usize = 1 << 20;

/// Counting calls in flight at once.
const COUNTING_AT_ONCE: usize = 8;

/// A corpus checked before the run.
#[derive(Debug, Clone, PartialEq)]
pub struct PromptCorpus {
    /// The file's name.
    pub name: String,
    /// SHA-256 of the whole file, hex.
    pub sha256: String,
    /// Bytes of the file.
    pub bytes: u64,
    /// Chunks cut from its opening, not yet counted.
    pub chunks: Vec<String>,
}

/// Reads and cuts `path`. Errors are one line naming the file.
pub fn load(path: &Path) -> Result<PromptCorpus, String> {
    let said = |e: String| format!("--prompt-corpus {}: {e}", path.display());
    let mut f = std::fs::File::open(path).map_err(|e| said(e.to_string()))?;
    let mut hasher = Sha256::new();
    let mut opening: Vec<u8> = Vec::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut bytes = 0u64;
    loop {
        let n = f.read(&mut buf).map_err(|e| said(e.to_string()))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        bytes += n as u64;
        let room = OPENING_BYTES.saturating_sub(opening.len());
        opening.extend_from_slice(&buf[..n.min(room)]);
    }
    let text = String::from_utf8_lossy(&opening);
    let chunks = cut(&text, MAX_CHUNKS);
    if text.split_whitespace().next().is_none() {
        return Err(said("no text to cut prompts from (empty?)".into()));
    }
    if chunks.len() < MIN_CHUNKS {
        return Err(said(format!(
            "too short: {} chunks of whole words, at least {MIN_CHUNKS} needed (about 2,000 \
             words of running text)",
            chunks.len()
        )));
    }
    Ok(PromptCorpus {
        name: path.file_name().map_or_else(
            || path.display().to_string(),
            |n| n.to_string_lossy().into(),
        ),
        sha256: format!("{:x}", hasher.finalize()),
        bytes,
        chunks,
    })
}

/// llama.cpp's raw `/tokenize`: tokens of `text` (no template, no BOS).
async fn count_content(rc: &RunCtx, text: &str) -> Option<u64> {
    let body = json!({"content": text});
    let (status, v) = rc
        .http
        .post_json("/tokenize", &body, std::time::Duration::from_secs(60))
        .await
        .ok()?;
    (status == 200).then(|| {
        v.get("tokens")
            .and_then(Value::as_array)
            .map(|t| t.len() as u64)
    })?
}

/// Tokens of one chunk as the server counts it inside a user message, less
/// the template's `template` tokens.
async fn count_one(rc: &RunCtx, disc: &Discovery, chunk: &str, template: u64) -> Option<u64> {
    match disc.tokenize {
        TokenizeKind::Content => count_content(rc, chunk).await,
        TokenizeKind::Chat => count_chat(&rc.http, disc, &user(chunk.to_string()))
            .await
            .map(|n| n.saturating_sub(template)),
        TokenizeKind::None => real_prompt_tokens(&rc.http, &disc.model, &user(chunk.to_string()))
            .await
            .map(|n| n.saturating_sub(template)),
    }
}

/// The text source of a replay: the word list without a corpus, else
/// [`count`]'s.
pub(super) async fn source(
    rc: &RunCtx,
    disc: &Discovery,
    corpus: Option<&PromptCorpus>,
    template: u64,
) -> (TextSource, Option<PromptCorpusInfo>) {
    match corpus {
        Some(c) => count(rc, disc, c, template).await,
        None => (TextSource::Words, None),
    }
}

/// Counts every chunk with the server's tokenizer: the text source the
/// builder draws from and what the result records; the word list (and an
/// event saying why) when too few chunks could be counted.
async fn count(
    rc: &RunCtx,
    disc: &Discovery,
    corpus: &PromptCorpus,
    template: u64,
) -> (TextSource, Option<PromptCorpusInfo>) {
    let counted: Vec<(String, u64)> = futures_util::stream::iter(corpus.chunks.iter())
        .map(|c| async move { (c.clone(), count_one(rc, disc, c, template).await) })
        .buffered(COUNTING_AT_ONCE)
        .filter_map(|(c, n)| async move { n.map(|n| (c, n)) })
        .collect()
        .await;
    let Some(pool) = CorpusPool::new(counted) else {
        rc.live.event(format!(
            "prompt corpus {}: the server counted too few of its chunks; prompts use the word \
             list",
            corpus.name
        ));
        return (TextSource::Words, None);
    };
    let info = PromptCorpusInfo {
        name: corpus.name.clone(),
        sha256: corpus.sha256.clone(),
        bytes: corpus.bytes,
        chunks: pool.chunks() as u64,
        tokens: pool.tokens(),
        counted_by: match disc.tokenize {
            TokenizeKind::Chat => "tokenize",
            TokenizeKind::Content => "tokenize_content",
            TokenizeKind::None => "usage",
        }
        .into(),
    };
    rc.live.event(format!(
        "prompt corpus {}: {} chunks, {} tokens counted ({}); longer prompts repeat its text",
        info.name, info.chunks, info.tokens, info.counted_by
    ));
    (TextSource::Corpus(Arc::new(pool)), Some(info))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(name: &str, text: &str) -> std::path::PathBuf {
        let p = std::env::temp_dir().join(format!("ldb-corpus-{}-{name}", std::process::id()));
        std::fs::write(&p, text).expect("write");
        p
    }

    #[test]
    fn a_bad_corpus_is_one_line_naming_the_file() {
        let missing = load(Path::new("/nonexistent/corpus.txt")).unwrap_err();
        assert!(missing.starts_with("--prompt-corpus /nonexistent/corpus.txt: "));
        let empty = write("empty", " \n\n ");
        assert!(load(&empty).unwrap_err().contains("no text"));
        let short = write(
            "short",
            "a few words only, far too short to cut prompts from",
        );
        assert!(load(&short).unwrap_err().contains("too short"));
        for p in [empty, short] {
            let _ = std::fs::remove_file(p);
        }
    }

    #[test]
    fn a_good_corpus_is_hashed_and_cut() {
        let text = "The quick brown fox jumps over the lazy dog near the river bank. ".repeat(300);
        let p = write("good", &text);
        let c = load(&p).expect("corpus");
        assert_eq!(c.bytes, text.len() as u64);
        assert_eq!(c.sha256, format!("{:x}", Sha256::digest(text.as_bytes())));
        assert!(c.chunks.len() >= MIN_CHUNKS);
        assert!(c.name.ends_with("-good"));
        let _ = std::fs::remove_file(p);
    }
}
