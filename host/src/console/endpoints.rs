//! Endpoints: what each serves (adapter, the URL to give the provider, tolerances, rate
//! limits) and its secret sets with their versions and expiry dates, never a value. Read
//! from the live endpoints and secrets, so a reload of either shows at once.

use askama::Template;
use axum::extract::{Extension, State};
use axum::response::Response;

use super::guard::Signed;
use super::page::{Chrome, html, when};
use super::state::Console;
use crate::config::RateLimit;

pub struct SecretRow {
    /// `secret`, or the slot a check names (`verify-token`).
    pub slot: String,
    pub set: String,
    /// `v2 (expires 2026-12-31T00:00:00Z)`, newest listed first as the file lists them.
    pub versions: Vec<String>,
}

pub struct EndpointRow {
    pub id: String,
    pub adapter: String,
    pub url: String,
    pub tolerance: String,
    pub rate_limit: String,
    pub max_body: String,
    pub secrets: Vec<SecretRow>,
}

#[derive(Template)]
#[template(path = "console/endpoints.html")]
struct EndpointsPage {
    chrome: Chrome,
    endpoints: Vec<EndpointRow>,
}

fn rate(limit: Option<&RateLimit>) -> String {
    limit.map_or_else(
        || "none".to_owned(),
        |l| format!("{}/s, burst {}", l.per_second, l.burst),
    )
}

pub async fn page(
    State(console): State<Console>,
    Extension(signed): Extension<Signed>,
) -> Response {
    let c = &console.0;
    let table = c.http.ingest.endpoints().load();
    let adapters = c.http.ingest.adapters();
    let secrets = c.secrets.current();
    let versions = |set: &str| -> Vec<String> {
        match &*secrets {
            Ok(file) => file
                .versions(set)
                .into_iter()
                .map(|v| {
                    let kind = if v.public_key { ", public key" } else { "" };
                    match v.expires_at {
                        Some(at) => format!("{} (expires {}{kind})", v.version, when(at)),
                        None => format!("{} (no expiry{kind})", v.version),
                    }
                })
                .collect(),
            Err(_) => vec!["(the secrets file cannot be read now)".to_owned()],
        }
    };
    let endpoints = table
        .iter()
        .map(|e| {
            let provider = c.config.providers.iter().find(|p| p.adapter == e.adapter);
            let mut secrets = vec![SecretRow {
                slot: "secret".into(),
                set: e.secret.clone(),
                versions: versions(&e.secret),
            }];
            secrets.extend(e.secrets.iter().map(|(slot, set)| SecretRow {
                slot: slot.clone(),
                set: set.clone(),
                versions: versions(set),
            }));
            // The endpoint's own tolerance, else the adapter's, else none (no signed time).
            let info = adapters.get(&e.adapter).map(|a| &a.info);
            let seconds = |own: Option<u64>, adapter: Option<u64>| match (own, adapter) {
                (Some(s), _) => format!("{s} s"),
                (None, Some(s)) => format!("{s} s (adapter)"),
                (None, None) if info.is_none() => "adapter not loaded".to_owned(),
                (None, None) => "no signed time".to_owned(),
            };
            EndpointRow {
                id: e.id.clone(),
                adapter: e.adapter.clone(),
                url: e
                    .public_url
                    .clone()
                    .unwrap_or_else(|| format!("{}/webhooks/{}", c.public_base, e.id)),
                tolerance: format!(
                    "past {}, future {}",
                    seconds(e.tolerance_secs, info.and_then(|i| i.tolerance_past_secs)),
                    seconds(
                        e.future_tolerance_secs,
                        info.and_then(|i| i.tolerance_future_secs)
                    )
                ),
                rate_limit: format!(
                    "endpoint {}; provider {}",
                    rate(e.rate_limit.as_ref()),
                    rate(provider.map(|p| &p.rate_limit))
                ),
                max_body: e
                    .max_body_bytes
                    .unwrap_or(c.config.server.max_body_bytes)
                    .to_string(),
                secrets,
            }
        })
        .collect();
    html(&EndpointsPage {
        chrome: Chrome::new(&signed.session, "endpoints", "Endpoints"),
        endpoints,
    })
}
