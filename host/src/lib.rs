//! Wharf: a webhook receiver. A request is verified against the endpoint's secrets using the
//! signed bytes a sandboxed provider adapter describes, then committed to a Postgres inbox
//! before any 2xx. See `docs/ARCHITECTURE.md` for the code map and the invariants.

pub mod cli;
pub mod clock;
pub mod config;
pub mod deliveries;
pub mod dev;
pub mod events;
pub mod failpoint;
pub mod fixtures;
pub mod http;
pub mod ingest;
pub mod metrics;
pub mod nats;
pub mod outbox;
pub mod processing;
pub mod reconcile;
pub mod redact;
pub mod reload;
pub mod scaffold;
pub mod secrets;
pub mod server;
pub mod store;
pub mod verify;
pub mod wasm;
pub mod watch;
pub mod worker;

pub use server::{Server, ServerOptions};
