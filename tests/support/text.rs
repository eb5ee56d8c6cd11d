//! Answers that are not JSON (Adyen's `[accepted]`): status, content type and body text.

/// POSTs `body` to `/webhooks/{endpoint}` and reads the answer as text.
pub async fn post_text(
    client: &reqwest::Client,
    base: &str,
    endpoint: &str,
    headers: &[(&str, &str)],
    body: Vec<u8>,
) -> (u16, String, String) {
    let mut request = client
        .post(format!("{base}/webhooks/{endpoint}"))
        .body(body);
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    let response = request.send().await.expect("request sent");
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap_or_default().to_owned())
        .unwrap_or_default();
    (status, content_type, response.text().await.expect("body"))
}
