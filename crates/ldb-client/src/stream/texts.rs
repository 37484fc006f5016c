//! The text a request's stream brought, kept for whoever asked for it: the
//! output viewer's tail and the per-channel texts (completion statistics,
//! the sessions' next turn).

use ldb_core::chunk::{Channel, ChunkInfo};

use super::StreamEnv;

/// The whole text of one request, by channel.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChannelTexts {
    /// `delta.reasoning` / `delta.reasoning_content`.
    pub reasoning: String,
    /// `delta.content` (and a delta mixing both channels).
    pub content: String,
    /// The first tool call's function name, when the reply called one.
    pub tool_name: Option<String>,
    /// The tool calls' argument fragments, joined.
    pub tool_arguments: String,
    /// The server answered 200 (the live view tells "connecting" from
    /// "waiting for the first token").
    pub responded: bool,
    /// Chunks that carried text.
    pub chunks: u64,
    /// Characters of text received (both channels).
    pub chars: u64,
    /// Run-clock time of the first chunk with text.
    pub first_at: Option<f64>,
    /// The response header the client notes (`Http::with_headers`).
    pub noted: Option<String>,
}

/// The viewer's tail keeps this many bytes (cut at twice as many).
const TEXT_TAIL: usize = 4096;

/// Hand a chunk's text to whoever asked for it: the output viewer's tail
/// (skipped when the viewer holds it: a token's text is not worth a wait)
/// and the per-channel texts completion statistics score (and a session's
/// next turn repeats).
#[inline]
pub(super) fn keep_text(env: &StreamEnv, t: f64, chunk: &ChunkInfo<'_>) {
    let text = chunk.text.as_deref().unwrap_or("");
    if let Some(sink) = &env.text_sink
        && let Ok(mut s) = sink.try_lock()
    {
        s.push_str(text);
        if s.len() > 2 * TEXT_TAIL {
            let mut cut = s.len() - TEXT_TAIL;
            while !s.is_char_boundary(cut) {
                cut += 1;
            }
            s.drain(..cut);
        }
    }
    if let Some(texts) = &env.texts {
        let mut tx = texts.lock().unwrap_or_else(|p| p.into_inner());
        tx.chunks += 1;
        tx.chars += text.chars().count() as u64;
        tx.first_at.get_or_insert(t);
        let tx = &mut *tx;
        if tx.tool_name.is_none() {
            tx.tool_name = chunk.tool_call_name.as_deref().map(str::to_string);
        }
        match chunk.channel {
            Channel::Reasoning => tx.reasoning.push_str(text),
            Channel::ToolCall => tx.tool_arguments.push_str(text),
            _ => tx.content.push_str(text),
        }
    }
}
