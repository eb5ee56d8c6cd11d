//! Processing: everything after acceptance, in `wharf serve` or `wharf worker`.
//!
//! - `context`: what every task shares (`Processing`: pool, config, signals, NATS, backoff)
//! - `tasks`: starting them all
//! - `worker`: leasing inbox rows, the built-in mutation, planning deliveries (claim, decide,
//!   write)
//! - `document`: whether an event's bytes can be the projection's `jsonb` document
//! - `outbox`: the relay that publishes accepted-event notices
//! - `deliveries`: the relay that sends deliveries to `http` and `nats` sinks
//! - `delivery_marks`: each attempt's result recorded, with a history row for each failure
//! - `signing`: Standard Webhooks signatures on HTTP deliveries
//! - `reconcile`: the periodic audit that requeues what went missing
//! - `nats`: the one lazy JetStream connection
//! - `payloads`: stored payloads opened (decrypted) and cut to an event's span, read by batch

mod context;
mod deliveries;
mod delivery_marks;
mod document;
mod nats;
mod outbox;
mod payloads;
mod reconcile;
mod signing;
mod tasks;
mod worker;

pub use context::Processing;
pub use deliveries::{DeliveryRelay, Lane};
pub use outbox::OutboxRelay;
pub use payloads::{LINK_COLUMNS, LinkRow, PayloadError, StoredPayload, event_bytes, event_span};
pub use reconcile::{Audit, Reconciler};
pub use signing::check_signing_sets;
pub use worker::{Claim, Effect, Worker};
