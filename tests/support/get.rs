//! GET requests to `/webhooks/{endpoint}`: the handshakes some providers send as GET (Meta's
//! `hub.challenge`), answered as text rather than JSON.

/// GETs `/webhooks/{endpoint}?{query}` (no `?` when `query` is empty).
pub async fn get(
    client: &reqwest::Client,
    base: &str,
    endpoint: &str,
    query: &str,
) -> super::http::Answer {
    let mut url = format!("{base}/webhooks/{endpoint}");
    if !query.is_empty() {
        url.push('?');
        url.push_str(query);
    }
    super::http::get_url(client, &url).await
}
