//! The guest SDK for Wharf provider adapters: an [`Adapter`] trait and the [`export!`] macro
//! that makes it a component, constructors for what its three functions return, and readers
//! for header values and verified bodies. An adapter needs one `use` and one export line:
//!
//! ```text
//! use wharf_adapter_sdk::*;
//!
//! struct Acme;
//! export!(Acme);
//!
//! impl Adapter for Acme { /* describe, prepare, parse */ }
//! ```
//!
//! Every item has one path, the crate root. Everything but [`Request`]'s methods (imports,
//! which exist only inside the host) builds and tests on the host target too.

#[doc(hidden)]
pub mod __bindings {
    //! Generated once here from the crate's own `wit/adapter.wit` (`wharf:adapter@0.2.0`, a
    //! copy of the repository's `wit/adapter.wit` that a test keeps identical), so the crate
    //! builds from its package alone and adapter crates need no `wit-bindgen` of their own. Not for authors: [`export!`](crate::export) is the
    //! only thing that uses the generated trait and export macro.
    wit_bindgen::generate!({
        path: "wit/adapter.wit",
        world: "adapter",
        pub_export_macro: true,
        export_macro_name: "export_adapter",
        default_bindings_module: "::wharf_adapter_sdk::__bindings",
    });
}

mod adapter;
mod decode;
mod digest;
mod json;
mod reject;
mod request;
mod results;
mod rfc3339;
mod spans;

pub use __bindings::wharf::adapter::types::{
    Algorithm, Answer, AnswerPart, Check, Description, Envelope, Handshake, Method, ObjectVersion,
    Ordering, Parsed, Part, Prepared, PublicKeyEncoding, Rejection, RejectionKind, Request,
    SecretEncoding, Span, Tolerance,
};
pub use adapter::*;
pub use decode::*;
pub use digest::*;
pub use json::*;
pub use reject::*;
pub use request::*;
pub use results::*;
pub use rfc3339::parse_rfc3339;
pub use spans::*;
