//! The bottom layer: leaves every other layer may use, and that use nothing of the crate.

pub mod adapter_key;
pub mod clock;
pub mod columns;
pub mod compression;
pub mod failpoint;
pub mod file_modes;
pub mod ids;
pub mod metrics;
pub mod payload_link;
pub mod redact;
pub mod sealing;
pub mod shown;
pub mod signals;
pub mod subjects;
pub mod toml_lines;
pub mod traces;
pub mod watch;
