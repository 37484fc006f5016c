//! The session lines about the router and the context: how often sessions
//! moved replica, what share of turns could not be attributed, each
//! replica's turns and achieved hit rate, and the sessions that stopped at
//! the model's context limit (docs/methodology.md, "Session affinity
//! through a router" and "Context limit in sessions").

use ldb_core::replay::session::SessionResult;

use super::Ctx;
use super::style::Tone;
use super::table::{Cell, Table};

fn pct(v: Option<f64>) -> String {
    v.map_or_else(|| "—".into(), |v| format!("{:.1}%", v * 100.0))
}

/// The lines for session run `label` (none when it met neither).
pub(crate) fn lines(cx: &Ctx<'_>, label: &str, s: &SessionResult) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(r) = &s.router {
        let mut t = Table::new(
            "Turns by replica",
            &["replica", "turns", "sessions", "achieved hit"],
        )
        .right(&[1, 2, 3]);
        for rep in &r.replicas {
            t.push(vec![
                Cell::plain(rep.replica.to_string()),
                Cell::plain(rep.turns.to_string()),
                Cell::plain(rep.sessions.to_string()),
                Cell::plain(pct(rep.achieved_hit_rate)),
            ]);
        }
        out.extend(t.render(cx.color));
        let moves: u32 = r.sessions.iter().map(|s| s.moves).sum();
        let tone = if r.sessions_moved > 0 {
            Tone::Warn
        } else {
            Tone::Dim
        };
        out.extend(cx.para(
            &format!(
                "{label}: through a router — {} sessions moved replica ({} moves; affinity \
                 failures {} of the sessions with two attributed turns); turns attributed by \
                 header {}, by counters {}, unattributed {} ({})",
                r.sessions_moved,
                moves,
                pct(r.affinity_failure_share),
                r.attributed_by_header,
                r.attributed_by_counters,
                r.unattributed,
                pct(r.unattributed_share),
            ),
            tone,
        ));
    }
    if s.sessions_stopped_at_context_limit > 0 {
        let first = s.context_limit_stops.first();
        out.extend(cx.para(
            &format!(
                "{label}: {} sessions stopped at the model's context limit{} — the next turn's \
                 prompt and max tokens would not fit; they stop rather than truncate",
                s.sessions_stopped_at_context_limit,
                first.map_or(String::new(), |f| format!(
                    " (first: session {} at turn {}, {} prompt tokens of {})",
                    f.session, f.turn, f.prompt_tokens, f.limit
                )),
            ),
            Tone::Warn,
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use ldb_core::document::ResultDocument;
    use ldb_core::replay::affinity::{ReplicaAffinity, RouterAffinity};
    use ldb_core::replay::session::ContextStop;

    use super::*;

    #[test]
    fn moves_unattributed_turns_replicas_and_context_stops_are_shown() {
        let doc = ResultDocument::default();
        let cx = Ctx {
            doc: &doc,
            width: 120,
            color: false,
            show_hidden: false,
        };
        let s = SessionResult {
            router: Some(RouterAffinity {
                sessions_moved: 2,
                affinity_failure_share: Some(0.5),
                unattributed: 3,
                unattributed_share: Some(0.25),
                replicas: vec![ReplicaAffinity {
                    replica: 1,
                    turns: 9,
                    sessions: 4,
                    achieved_hit_rate: Some(0.625),
                }],
                ..RouterAffinity::default()
            }),
            sessions_stopped_at_context_limit: 1,
            context_limit_stops: vec![ContextStop {
                session: 2,
                turn: 5,
                prompt_tokens: 7900,
                limit: 8192,
                refused_by_server: false,
            }],
            ..SessionResult::default()
        };
        let text = lines(&cx, "sessions 1", &s).join("\n");
        assert!(text.contains("2 sessions moved replica"), "{text}");
        assert!(text.contains("affinity failures 50.0%"), "{text}");
        assert!(text.contains("unattributed 3 (25.0%)"), "{text}");
        assert!(text.contains("62.5%"), "{text}");
        assert!(
            text.contains("session 2 at turn 5, 7900 prompt tokens of 8192"),
            "{text}"
        );
        assert!(lines(&cx, "x", &SessionResult::default()).is_empty());
    }
}
