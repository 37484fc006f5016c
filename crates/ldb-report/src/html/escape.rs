//! HTML escaping of every text that comes from a result file.

/// `text` safe inside an element or a double- or single-quoted attribute.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::escape;

    #[test]
    fn markup_characters_are_replaced() {
        assert_eq!(
            escape("<script>alert('x&y')</script> \"q\""),
            "&lt;script&gt;alert(&#39;x&amp;y&#39;)&lt;/script&gt; &quot;q&quot;"
        );
        assert_eq!(escape("GLM-5 ∅ 8k"), "GLM-5 ∅ 8k");
    }
}
