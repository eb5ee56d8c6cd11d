//! Black-box tests of the ingest pipeline: raw HTTP bytes in, Postgres rows out.
//! Every test starts the host on port 0 against a fresh database with migrations applied,
//! and real adapter components built by `cargo xtask adapters`.

#[path = "../support/mod.rs"]
mod support;

mod bounds;
mod cli;
mod concurrency;
mod config_check;
mod console_http;
mod contract;
mod dist;
mod first_minutes;
mod fixtures;
mod group_commit;
mod languages;
mod limits;
mod live_config;
mod live_config_routes;
mod logs;
mod outage;
mod projects;
mod provider_adyen;
mod provider_discord;
mod provider_gitlab;
mod provider_hmac_bodies;
mod provider_meta;
mod provider_sendgrid;
mod provider_square;
mod provider_standard_webhooks_v1a;
mod provider_twilio;
mod provider_zoom;
mod rate_limits;
mod reload;
mod sandbox;
mod scaffold;
mod secrets;
mod self_signed_fixtures;
mod signed_adapters;
mod slow_bodies;
mod strangers;
mod tenminute;
mod tls;
mod vectors;
mod walkthrough;
mod wit_check;
mod wit_versions;
