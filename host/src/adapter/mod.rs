//! The adapter sandbox: the only place wasmtime appears. Everything above sees host types.
//!
//! - `bindings`: one `bindgen!` per served WIT version (0.1 converted into 0.2's types) and the
//!   host side of the `request` resource
//! - `sandbox`: engine, pooling allocator, linker, every limit, one guest call
//! - `imports`: the import allowlist and the WIT package version a component targets
//! - `info`: what `describe` declares, checked (`AdapterInfo`, `MacAlgorithm`, `KeyEncoding`)
//! - `loaded`: a loaded adapter (`describe`) and the instance serving one request (`prepare`, `parse`)
//! - `signature`: detached `.sig` files: who signed a component, and whether that is trusted
//! - `set`: the loaded adapters by name, with the status of every file
//! - `wasm_error`: wasmtime's errors into anyhow's, by their message, in one place

mod bindings;
mod imports;
mod info;
mod loaded;
mod sandbox;
mod set;
pub mod signature;
mod wasm_error;

pub use bindings::{
    Algorithm, Answer, AnswerPart, Check, Envelope, Handshake, Method, ObjectVersion, Parsed, Part,
    Prepared, PublicKeyEncoding, Rejection, RejectionKind, RequestView, Span, WitVersion,
};
pub use info::{AdapterInfo, KeyEncoding, MacAlgorithm, algorithm_name, uses_public_key};
pub use loaded::{LoadedAdapter, RequestInstance};
pub use sandbox::{AdapterFailure, Sandbox, SandboxLimits};
pub use set::{AdapterSet, FileState, FileStatus};
