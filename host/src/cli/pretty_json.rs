//! A JSON payload shown to a person: indented, and otherwise the provider's own text. It is
//! re-indented token by token, not parsed and printed again, so keys keep their order,
//! numbers their digits and strings their escapes, exactly as the provider signed them.

/// `text` indented two spaces a level (as `serde_json`'s pretty printer does), its lines after
/// the first also shifted by `base` spaces; none when `text` is not a JSON object or array.
pub fn reindent(text: &str, base: usize) -> Option<String> {
    let trimmed = text.trim();
    if !(trimmed.starts_with('{') || trimmed.starts_with('[')) {
        return None;
    }
    serde_json::from_str::<serde::de::IgnoredAny>(trimmed).ok()?;
    let newline = |out: &mut String, depth: usize| {
        out.push('\n');
        out.extend(std::iter::repeat_n(' ', base + 2 * depth));
    };
    let mut out = String::with_capacity(trimmed.len() * 2);
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    let mut chars = trimmed.chars().peekable();
    while let Some(c) = chars.next() {
        if in_string {
            out.push(c);
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            ' ' | '\t' | '\n' | '\r' => {}
            '"' => {
                in_string = true;
                out.push(c);
            }
            '{' | '[' => {
                out.push(c);
                while chars.next_if(|n| n.is_ascii_whitespace()).is_some() {}
                // An empty object or array stays on its line.
                match chars.peek() {
                    Some('}' | ']') => out.push(chars.next().expect("peeked")),
                    _ => {
                        depth += 1;
                        newline(&mut out, depth);
                    }
                }
            }
            '}' | ']' => {
                depth = depth.saturating_sub(1);
                newline(&mut out, depth);
                out.push(c);
            }
            ',' => {
                out.push(c);
                newline(&mut out, depth);
            }
            ':' => out.push_str(": "),
            _ => out.push(c),
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::reindent;

    #[test]
    fn indents_like_serde_json_and_keeps_the_providers_tokens() {
        let text =
            r#"{"b":1,"a":{"n":12345678901234567890.50,"s":"x\"},{\u00e9"},"e":[],"l":[1, {}]}"#;
        let shown = reindent(text, 0).unwrap();
        assert_eq!(
            shown,
            "{\n  \"b\": 1,\n  \"a\": {\n    \"n\": 12345678901234567890.50,\n    \
             \"s\": \"x\\\"},{\\u00e9\"\n  },\n  \"e\": [],\n  \"l\": [\n    1,\n    {}\n  ]\n}"
        );
        let parsed: serde_json::Value = serde_json::from_str(&shown).unwrap();
        assert_eq!(
            parsed,
            serde_json::from_str::<serde_json::Value>(text).unwrap()
        );
        assert_eq!(reindent("[1]", 4).unwrap(), "[\n      1\n    ]");
    }

    #[test]
    fn text_that_is_not_a_json_object_or_array_is_left_alone() {
        for text in [
            "a=1&b=2",
            "<xml/>",
            "\"a string\"",
            "12",
            "{\"open\": 1",
            "",
        ] {
            assert_eq!(reindent(text, 0), None, "{text}");
        }
    }
}
