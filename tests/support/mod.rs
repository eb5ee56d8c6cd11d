//! Test support shared by the `ingest` and `processing` test binaries, one module per concern:
//!
//! - [`app`]: a Wharf server under test, in process: `TestApp::builder()`, then
//!   `.write_config()` or `.start()`.
//! - [`database`]: a fresh Postgres database per test, and queries for assertions
//!   (`execute`, `one_row`, `all_rows`, `holding`).
//! - [`files`]: the repository's files (built adapters, vectors) and file operations.
//! - [`get`]: GET requests to `/webhooks/{endpoint}` (handshakes served on GET).
//! - [`http`]: requests to the server and the one [`http::Answer`] they all return, down to
//!   raw TCP.
//! - [`process`]: the `wharf` binary run as a child process, and its log.
//! - [`signing`]: provider secrets, and requests signed as Stripe and GitHub sign them.
//! - [`text`]: Adyen's `[accepted]` as a `(status, content type, body)` tuple, until its test
//!   reads [`http::Answer`].
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
pub mod collector;
pub mod database;
pub mod files;
pub mod get;
pub mod http;
pub mod nats;
pub mod process;
pub mod receiver;
pub mod signing;
pub mod text;
pub mod wait;
