//! Hot reload of the adapters folder and the fixtures that vet each file, and of the config
//! file's endpoints and routes.
//!
//! - `watcher`: `Reloader`, one pass over the folder (watch, debounce, poll), vetting, the swap
//! - `config_file`: `ConfigReloader`, the config file watched: endpoints and routes swap live,
//!   any other change refused with its reason
//! - `route_changes`: what a reload changed of the routes, by delivery target
//! - `fixtures`: the fixture format, the runner behind `wharf adapter test`, the bounded diff
//! - `fixture_sign`: self-signing fixtures: `[sign]`, the templates and the MAC the runner computes
//! - `fixture_folder`: reading a fixtures folder: plain folders and files only, sizes capped

mod config_file;
mod fixture_folder;
mod fixture_sign;
mod fixtures;
mod route_changes;
mod watcher;

pub use config_file::{ConfigReloader, EndpointChanges, Refusal, restart_only_changes};
pub use fixture_folder::{MAX_BODY_BYTES, MAX_TOML_BYTES};
pub use fixtures::{
    CaseResult, Expected, ExpectedEvent, ExpectedHandshake, MAX_DIFF_BYTES, MAX_DIFF_LINES, Ran,
    Report, diff, run_case, run_dir,
};
pub use route_changes::RouteChanges;
pub use watcher::{Reloader, fixtures_dir};
