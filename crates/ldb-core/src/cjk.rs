//! Han ideographs in generated text.
//!
//! A model that drifts into Chinese mid-answer (a known failure of some
//! quantized or badly templated checkpoints) is spotted by counting Han
//! characters. Kana, Hangul, CJK punctuation and full-width forms are not
//! counted: they turn up in correct answers too (quotes, Japanese names),
//! and only the ideographs mark the drift. Used by the coding-peak probe
//! (`cjk_chars`, `cjk_runs`) and by `llm-decode-bench cjk-watchdog`.

use std::ops::RangeInclusive;

/// The counted blocks, as code points: the unified ideographs, extension A,
/// extensions B to F (supplementary plane), and the compatibility ideographs.
pub const HAN_RANGES: [RangeInclusive<u32>; 7] = [
    0x4E00..=0x9FFF,
    0x3400..=0x4DBF,
    0x20000..=0x2A6DF,
    0x2A700..=0x2B73F,
    0x2B740..=0x2B81F,
    0x2B820..=0x2CEAF,
    0xF900..=0xFAFF,
];

/// True for a Han ideograph of one of [`HAN_RANGES`].
pub fn is_han(c: char) -> bool {
    let cp = u32::from(c);
    HAN_RANGES.iter().any(|r| r.contains(&cp))
}

/// Number of Han ideographs in `text`.
pub fn count_han(text: &str) -> u64 {
    text.chars().filter(|&c| is_han(c)).count() as u64
}

/// Byte offset of the first Han ideograph in `text`, if any.
pub fn first_han(text: &str) -> Option<usize> {
    text.char_indices()
        .find(|&(_, c)| is_han(c))
        .map(|(i, _)| i)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ch(cp: u32) -> char {
        char::from_u32(cp).expect("valid scalar value")
    }

    #[test]
    fn every_range_counts_its_ends_and_not_its_neighbours() {
        for r in &HAN_RANGES {
            assert!(is_han(ch(*r.start())), "{:X}", r.start());
            assert!(is_han(ch(*r.end())), "{:X}", r.end());
            let inside = r.start() + (r.end() - r.start()) / 2;
            assert!(is_han(ch(inside)), "{inside:X}");
        }
        // Just outside each range (where the neighbour is not itself counted).
        for cp in [
            0x4DFF, 0xA000, 0x33FF, 0x1FFFF, 0x2A6E0, 0x2A6FF, 0x2CEB0, 0xF8FF, 0xFB00,
        ] {
            assert!(!is_han(ch(cp)), "{cp:X}");
        }
        // Ranges that touch: 2B73F|2B740 and 2B81F|2B820 are both counted.
        for cp in [0x2B73F, 0x2B740, 0x2B81F, 0x2B820] {
            assert!(is_han(ch(cp)), "{cp:X}");
        }
    }

    #[test]
    fn kana_hangul_punctuation_and_fullwidth_forms_are_not_han() {
        for c in [
            'あ', 'ア', '한', '。', '、', '「', 'Ａ', '！', '〇', 'ー', 'a', '£', '😀',
        ] {
            assert!(!is_han(c), "{c}");
        }
        assert_eq!(count_han("ひらがな カタカナ 한국어 「」。"), 0);
    }

    #[test]
    fn counts_ideographs_of_the_basic_and_supplementary_planes() {
        // 漢字 (BMP), 𠀀 (U+20000) and 𪜀 (U+2A700): four ideographs, of which
        // two take a surrogate pair in UTF-16 and four bytes in UTF-8.
        let text = "def f(): # 漢字 𠀀 x 𪜀";
        assert_eq!(count_han(text), 4);
        assert_eq!(count_han("plain ASCII"), 0);
        assert_eq!(count_han(""), 0);
        assert_eq!(count_han("豈"), 1); // U+F900, compatibility ideograph
    }

    #[test]
    fn finds_the_first_ideograph() {
        assert_eq!(first_han("abc"), None);
        assert_eq!(first_han("ab中c"), Some(2));
        assert_eq!(first_han("é𠀀"), Some(2));
    }
}
