//! Standalone adapter projects: a folder anywhere (outside this repository too) holding
//! `wharf-adapter.toml`, the adapter's source in Rust, JavaScript or Python, `fixtures/`, a
//! README with the three commands, and a CI script; it builds to `dist/NAME.wasm`.
//!
//! - `manifest`: `wharf-adapter.toml`, what a project is (name, language, WIT version)
//! - `new`: `adapter new NAME --dir DIR`: what a new project holds
//! - `guide`: the README and `ci.sh` every new project gets
//! - `rust`, `js`, `python`: each language's template and build
//! - `build`: `adapter build`, dispatched on the project's language
//! - `watch`: `adapter watch --into`: rebuild, test and ship into a receiver's folder
//! - `toolchain`: the pinned JS and Python toolchains, their cache and install

mod build;
mod guide;
mod js;
mod manifest;
mod new;
mod python;
mod rust;
mod toolchain;
mod watch;

pub use build::build;
pub use manifest::{Lang, Project};
pub use new::{new_project, next_steps};
pub use watch::{Watch, run_fixtures, watch};
