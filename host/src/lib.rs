//! Wharf: a webhook receiver. A request is verified against the endpoint's secrets using the
//! signed bytes a sandboxed provider adapter describes, then committed to a Postgres inbox
//! before any 2xx. See `docs/ARCHITECTURE.md` for the code map and the invariants.
//!
//! The modules below are layers, bottom first: a module may import only from the layers above
//! it in this list, never from its own layer's later entries or from below. The `layers` test
//! reads this list (the `pub mod` lines, in order) and every `crate::` path in `src/`.

// One blank line between layers keeps rustfmt from sorting them alphabetically.

/// Leaves: clock, failpoints, folder watching, metrics, log redaction, signals, subject names.
pub mod support;

/// The TOML config, environment overrides, validation at start.
pub mod config;

/// The adapter sandbox: the only place wasmtime appears.
pub mod adapter;

/// The pipeline, verification, secrets and the store.
pub mod ingest;

/// Hot reload of the adapters folder and the fixture runner.
pub mod reload;

/// Workers, relays, the reconciler and NATS.
pub mod processing;

/// Operator queries behind `wharf events|deliveries|payloads` and the admin API: list, show,
/// replay, re-encrypt.
pub mod operator;

/// Day partitions created ahead and dropped whole when they expire.
pub mod retention;

/// Public and admin routes.
pub mod http;

/// The operator console: web pages on the admin listener.
pub mod console;

/// The composition root: a receiver (`Server`) or processing alone (`ProcessingHost`).
pub mod server;

/// The command line: commands, the dev cluster, the adapter scaffold.
pub mod cli;

pub use server::{Server, ServerOptions};

#[cfg(test)]
mod file_rules;
#[cfg(test)]
mod layers;
