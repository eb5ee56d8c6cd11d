//! Black-box tests of processing: workers, the projection, deliveries through the outbox,
//! crash recovery and the operator commands, against real Postgres, NATS and HTTP.

#[path = "../support/mod.rs"]
mod support;

mod admin_bounds;
mod alerts;
mod backlog;
mod batches;
mod claims;
mod console_queries;
mod crash;
mod deliveries_admin;
mod encryption;
mod failures;
mod handoff;
mod headers;
mod leaks;
mod leases;
mod nats;
mod notices;
mod once;
mod operators;
mod ordering;
mod payload_links;
mod plans;
mod retention;
mod signed;
mod spans;
mod traces;
