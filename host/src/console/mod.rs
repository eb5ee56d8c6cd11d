//! The operator console: server-rendered pages under `/console/` on the admin listener, from
//! templates compiled into the binary (`host/templates/console/`), with no script at all.
//! Admins see and do everything; viewers everything but payloads and replays.
//!
//! - `state`: `Console`, what every page reads (pool, secrets, adapters, endpoints, sessions)
//! - `routes`: the routes and the order of the guards
//! - `guard`: security headers, the session check, CSRF on every POST, admin-only actions
//! - `session`: sessions in this process, their roles, expiry and CSRF tokens
//! - `signin`: sign-in with a token (failures limited per address), sign-out
//! - `page`: the frame of a page, rendering, `ConsoleError` answered as HTML
//! - `overview`, `events`, `deliveries`, `adapters`, `endpoints`: the pages
//! - `chart`: small SVG charts drawn on the server
//! - `assets`: the stylesheet

mod adapters;
mod assets;
mod chart;
mod deliveries;
mod endpoints;
mod events;
mod guard;
mod overview;
mod page;
mod routes;
mod session;
mod signin;
mod state;

pub use state::{Console, ConsoleParts};
