//! Answers that are not JSON (Adyen's `[accepted]`), as the `(status, content type, body)`
//! that `provider_adyen.rs` still reads; new code reads [`super::http::Answer`].

/// POSTs `body` to `/webhooks/{endpoint}`: (status, content type or empty, body text).
pub async fn post_text(
    client: &reqwest::Client,
    base: &str,
    endpoint: &str,
    headers: &[(&str, &str)],
    body: Vec<u8>,
) -> (u16, String, String) {
    let answer = super::http::post(client, base, endpoint, headers, body).await;
    let content_type = answer.content_type.clone().unwrap_or_default();
    (answer.status, content_type, answer.body)
}
