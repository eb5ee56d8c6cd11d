//! NATS subject names, shared by the config's validation, the ingest store (the outbox row's
//! topic) and the processing relays that publish.

/// The topic of one accepted event (the outbox row's `topic`): `<endpoint>.<event type>`,
/// published under `[nats] accepted_prefix`.
pub fn accepted_topic(endpoint_id: &str, event_type: &str) -> String {
    format!(
        "{}.{}",
        subject_tokens(&endpoint_id.replace('.', "_")),
        subject_tokens(event_type)
    )
}

/// A subject to publish to: dot-separated non-empty tokens, no wildcards or whitespace.
pub fn valid_subject(subject: &str) -> bool {
    !subject.is_empty()
        && subject.split('.').all(|token| {
            !token.is_empty()
                && token != "*"
                && token != ">"
                && !token
                    .bytes()
                    .any(|b| b.is_ascii_whitespace() || b.is_ascii_control())
        })
}

/// Makes provider text (endpoint ids, event types) safe inside a subject: every character
/// outside `[A-Za-z0-9_-.]` becomes `_`, and empty tokens become `_`.
pub fn subject_tokens(text: &str) -> String {
    let cleaned: String = text
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "_-.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    cleaned
        .split('.')
        .map(|t| if t.is_empty() { "_" } else { t })
        .collect::<Vec<_>>()
        .join(".")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subjects() {
        assert!(valid_subject("wharf.stripe"));
        assert!(!valid_subject("wharf.*"));
        assert!(!valid_subject("wharf..x"));
        assert!(!valid_subject("wharf x"));
        assert_eq!(subject_tokens("invoice.paid"), "invoice.paid");
        assert_eq!(subject_tokens("a b.*.>"), "a_b._._");
        assert_eq!(subject_tokens(".x."), "_.x._");
        assert!(valid_subject(&subject_tokens("..weird type*")));
    }
}
