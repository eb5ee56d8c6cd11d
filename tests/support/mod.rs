//! Test support shared by the `ingest` and `processing` test binaries, one module per concern:
//!
//! - [`app`]: a Wharf server under test, in process: `TestApp::builder()`, then
//!   `.write_config()` or `.start()`.
//! - [`browser`]: headless Chromium driven over WebDriver, for the console tests.
//! - [`database`]: a fresh Postgres database per test, and queries for assertions
//!   (`execute`, `one_row`, `all_rows`, `holding`).
//! - [`files`]: the repository's files (built adapters, vectors) and file operations.
//! - [`get`]: GET requests to `/webhooks/{endpoint}` (handshakes served on GET).
//! - [`http`]: requests to the server and the one [`http::Answer`] they all return, down to
//!   raw TCP.
//! - [`mutate`]: requests changed one element at a time (header names ignoring case).
//! - [`offline`]: the host's verification alone, with no server and no database.
//! - [`process`]: the `wharf` binary run as a child process, and its log.
//! - [`secrets`]: secret sets (versions, expiry, public keys) and endpoints, as TOML.
//! - [`signing`]: provider secrets, and requests signed as Stripe and GitHub sign them.
//! - [`stored`]: what a provider test's app answered and stored.
//! - [`vectors`]: the published vectors, typed, and the runner that sends them.
//!
//! Used by the processing tests only:
//!
//! - [`receiver`]: an HTTP receiver that records the deliveries it gets.
//! - [`nats`]: a NATS stream private to one test.
//! - [`collector`]: an OTLP/HTTP collector that keeps the spans it is sent.
//! - [`wait`]: polling until the system converges.

// Each test binary compiles the whole tree and uses part of it; every item is used by one.
#![allow(dead_code)]

pub mod app;
pub mod browser;
pub mod collector;
pub mod database;
pub mod files;
pub mod get;
pub mod http;
pub mod mutate;
pub mod nats;
pub mod offline;
pub mod process;
pub mod receiver;
pub mod secrets;
pub mod signing;
pub mod stored;
pub mod vectors;
pub mod wait;
