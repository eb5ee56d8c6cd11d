//! The operator console in a real headless Chromium (Debian's `chromium`, driven through
//! `chromedriver` by `support::browser`), against a `TestApp` whose admin listener serves
//! `/console/` with the admin token and a viewer token set. The pages are found by the ids
//! and classes of the console's DOM contract. Screenshots of each page land in
//! `target/console-screenshots/` for a human to look at.

#[path = "../support/mod.rs"]
mod support;

mod adapters;
mod deliveries;
mod escaping;
mod events;
mod kit;
mod refusals;
mod reveal;
mod session;
mod signin;
