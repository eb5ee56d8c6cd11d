//! The local delivery target `wharf dev` runs for the example config's route, so that a new
//! user sees deliveries happen (`wharf deliveries list`) without writing a receiver first: it
//! answers every request 200 and says one line per request on stderr (method, path,
//! `Idempotency-Key`, byte count; never the body).

use std::net::SocketAddr;

use axum::body::Bytes;
use axum::extract::DefaultBodyLimit;
use http::{HeaderMap, Method, StatusCode, Uri};

use crate::config::{Config, SinkKind};

/// Where the sink listens, and where the example route sends.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8090";
/// Moves the sink (the tests run several `wharf dev` at once, each on a free port).
pub const LISTEN_ENV: &str = "WHARF_DEV_SINK_LISTEN";
/// As large as any body the receiver accepts (`[server] max_body_bytes` at most).
const MAX_BODY: usize = 64 << 20;

/// Starts the sink when an http route of `config` sends to its address (none otherwise: a
/// config of one's own has its own targets). A taken address is a warning, not a stop:
/// deliveries then go to whatever listens there.
pub async fn start_for(config: &Config) -> anyhow::Result<Option<SocketAddr>> {
    let listen = std::env::var(LISTEN_ENV).unwrap_or_else(|_| DEFAULT_LISTEN.to_owned());
    let addr: SocketAddr = listen
        .parse()
        .map_err(|e| anyhow::anyhow!("{LISTEN_ENV} {listen:?}: {e} (expected host:port)"))?;
    if !config
        .routes
        .iter()
        .any(|r| sends_to(r.sink, r.url.as_deref(), addr))
    {
        return Ok(None);
    }
    let listener = match tokio::net::TcpListener::bind(addr).await {
        Ok(listener) => listener,
        Err(e) => {
            tracing::warn!(%addr, error = %e,
                "wharf dev: the local sink cannot listen; deliveries go to whatever answers there");
            return Ok(None);
        }
    };
    let bound = listener.local_addr()?;
    let app = axum::Router::new()
        .fallback(receive)
        .layer(DefaultBodyLimit::max(MAX_BODY));
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::warn!(error = %e, "wharf dev: the local sink stopped");
        }
    });
    Ok(Some(bound))
}

/// Whether a route sends over http to `addr` (its URL's host and port, as written).
fn sends_to(sink: SinkKind, url: Option<&str>, addr: SocketAddr) -> bool {
    let Some(url) = url.and_then(|u| reqwest::Url::parse(u).ok()) else {
        return false;
    };
    let host_port = url
        .host_str()
        .zip(url.port_or_known_default())
        .and_then(|(host, port)| format!("{host}:{port}").parse::<SocketAddr>().ok());
    sink == SinkKind::Http && url.scheme() == "http" && host_port == Some(addr)
}

async fn receive(method: Method, uri: Uri, headers: HeaderMap, body: Bytes) -> StatusCode {
    // The key is the inbox id Wharf sets; anything else a client sends is shown only if printable.
    let key = headers
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .filter(|k| k.len() <= 128)
        .unwrap_or("-");
    eprintln!(
        "wharf dev sink: {method} {} Idempotency-Key: {key} ({} bytes)",
        uri.path(),
        body.len()
    );
    StatusCode::OK
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_route_sends_to_the_sink_only_over_http_at_its_address() {
        let addr: SocketAddr = DEFAULT_LISTEN.parse().unwrap();
        let url = Some("http://127.0.0.1:8090/deliveries");
        assert!(sends_to(SinkKind::Http, url, addr));
        assert!(!sends_to(SinkKind::Nats, url, addr));
        assert!(!sends_to(
            SinkKind::Http,
            Some("http://127.0.0.1:9000/x"),
            addr
        ));
        assert!(!sends_to(
            SinkKind::Http,
            Some("https://127.0.0.1:8090/x"),
            addr
        ));
        assert!(!sends_to(SinkKind::Http, None, addr));
    }
}
