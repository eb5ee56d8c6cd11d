//! GET requests to `/webhooks/{endpoint}`: the handshakes some providers send as GET (Meta's
//! `hub.challenge`), answered as text rather than JSON.

/// A GET's answer, read whole.
#[derive(Debug)]
pub struct TextAnswer {
    pub status: u16,
    pub content_type: Option<String>,
    pub body: String,
}

/// GETs `/webhooks/{endpoint}?{query}` (no `?` when `query` is empty).
pub async fn get(client: &reqwest::Client, base: &str, endpoint: &str, query: &str) -> TextAnswer {
    let mut url = format!("{base}/webhooks/{endpoint}");
    if !query.is_empty() {
        url.push('?');
        url.push_str(query);
    }
    let response = client.get(url).send().await.expect("request sent");
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let body = response.text().await.expect("body");
    TextAnswer {
        status,
        content_type,
        body,
    }
}
