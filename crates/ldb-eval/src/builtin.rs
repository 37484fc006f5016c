//! Our built-in task texts (pure): a generated long-context retrieval task
//! whose length is a parameter, and a short reasoning puzzle with a numeric
//! answer. Both have answers known exactly, so they score with
//! `numeric_exact`.

/// Default length of the `needle` document, in approximate tokens.
pub const NEEDLE_DEFAULT_TOKENS: usize = 8000;

/// Approximate tokens per ledger line (a line is ~14 words of mostly short
/// tokens); the document length is set by this estimate.
pub const NEEDLE_TOKENS_PER_LINE: usize = 16;

/// A generated retrieval task.
#[derive(Debug, Clone, PartialEq)]
pub struct Needle {
    /// The whole user message (document + question).
    pub prompt: String,
    /// The numeric answer.
    pub answer: u64,
    /// Ledger lines in the document.
    pub lines: usize,
}

/// Deterministic 64-bit generator (splitmix64), so the same length always
/// gives the same document on every platform.
struct Mix(u64);

impl Mix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const PREFIXES: [&str; 8] = ["AR", "BK", "CT", "DV", "EL", "FN", "GS", "HM"];

fn crate_code(r: &mut Mix) -> String {
    format!(
        "{}-{:03}",
        PREFIXES[r.below(PREFIXES.len() as u64) as usize],
        r.below(1000)
    )
}

/// The two tracked crates use a prefix no filler crate has, so no filler
/// line can mention them.
const TRACKED: [&str; 2] = ["QX-417", "QX-958"];

/// A warehouse ledger of about `tokens` tokens in which two crates move
/// several times (first, middle and last thirds of the document); the
/// question asks for the sum of their final bay numbers.
pub fn needle(tokens: usize) -> Needle {
    let lines = (tokens / NEEDLE_TOKENS_PER_LINE).max(12);
    let mut r = Mix(0x6c64_6200 ^ tokens as u64);
    // where the tracked crates move: three moves each, one per third
    let mut moves: Vec<(usize, usize, u64)> = Vec::new(); // (line, crate, bay)
    for (c, _) in TRACKED.iter().enumerate() {
        for third in 0..3 {
            let start = third * lines / 3;
            let span = (lines / 3).max(1);
            let line = start + r.below(span as u64) as usize;
            moves.push((line, c, 10 + r.below(90)));
        }
    }
    moves.sort_by_key(|m| (m.0, m.1));
    let mut final_bay = [0u64; 2];
    let mut doc = String::with_capacity(lines * 70);
    doc.push_str("Warehouse movement ledger. Each entry records one crate moved between bays.\n\n");
    let mut next_move = 0;
    for i in 0..lines {
        while next_move < moves.len() && moves[next_move].0 == i {
            let (_, c, bay) = moves[next_move];
            let from = if final_bay[c] == 0 {
                "receiving".to_owned()
            } else {
                format!("bay {}", final_bay[c])
            };
            doc.push_str(&format!(
                "Entry {:05}: crate {} moved from {from} to bay {bay}, checked by the night shift.\n",
                i + 1,
                TRACKED[c]
            ));
            final_bay[c] = bay;
            next_move += 1;
        }
        let code = crate_code(&mut r);
        doc.push_str(&format!(
            "Entry {:05}: crate {code} moved from bay {} to bay {}, checked by the day shift.\n",
            i + 1,
            10 + r.below(90),
            10 + r.below(90)
        ));
    }
    let answer = final_bay[0] + final_bay[1];
    let prompt = format!(
        "{doc}\nQuestion: after every entry above, in which bay does crate {} end up, and in which \
         bay does crate {} end up? Give the sum of those two bay numbers. Write the sum alone on \
         the last line.",
        TRACKED[0], TRACKED[1]
    );
    Needle {
        prompt,
        answer,
        lines,
    }
}

/// The `toggle-lamps` puzzle (our own; answer 23).
pub const LAMPS_PROMPT: &str = "A corridor has 60 lamps numbered 1 to 60, all switched off. \
Sixty people walk down the corridor one after another. Person k (k = 1, 2, ..., 60) flips the \
switch of every lamp whose number is a multiple of k (off becomes on, on becomes off). After \
all sixty have passed, an electrician switches off every lamp whose number is a multiple of 7 \
(lamps already off stay off). Finally a child flips the switch of every lamp whose number is a \
prime. How many lamps are on at the end? Write the number alone on the last line.";

/// Its answer: after the sixty passes exactly the squares are on (1, 4, 9,
/// 16, 25, 36, 49); the electrician turns off 49, leaving 6; the 17 primes
/// up to 60 are all off at that point (no prime is a square, and 7 was off
/// already), so the child turns all 17 on: 6 + 17 = 23.
pub const LAMPS_ANSWER: u64 = 23;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lamps_answer_by_simulation() {
        let mut on = [false; 61];
        for k in 1..=60 {
            for n in (k..=60).step_by(k) {
                on[n] = !on[n];
            }
        }
        for n in (7..=60).step_by(7) {
            on[n] = false;
        }
        for (p, lamp) in on.iter_mut().enumerate().skip(2) {
            if (2..p).all(|d| p % d != 0) {
                *lamp = !*lamp;
            }
        }
        assert_eq!(on.iter().filter(|&&x| x).count() as u64, LAMPS_ANSWER);
    }

    #[test]
    fn needle_is_deterministic_sized_and_answerable() {
        let a = needle(8000);
        assert_eq!(a, needle(8000));
        assert_eq!(a.lines, 500);
        // the document's own last mentions give the answer
        let last_bay = |code: &str| -> u64 {
            let line = a
                .prompt
                .lines()
                .rfind(|l| l.contains(&format!("crate {code} moved")))
                .unwrap();
            line.split("to bay ").nth(1).unwrap()[..2].parse().unwrap()
        };
        assert_eq!(last_bay(TRACKED[0]) + last_bay(TRACKED[1]), a.answer);
        let mentions = a.prompt.matches("crate QX-417 moved").count();
        assert_eq!(mentions, 3);
        // a longer document is longer, roughly in proportion
        let b = needle(32000);
        let ratio = b.prompt.len() as f64 / a.prompt.len() as f64;
        assert!((3.5..4.5).contains(&ratio), "{ratio}");
        assert_eq!(needle(10).lines, 12);
    }
}
