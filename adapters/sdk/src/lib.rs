//! The guest SDK for Wharf provider adapters: the WIT bindings, an export macro, constructors
//! for what the three exports return, and decoders for header values and verified bodies.
//!
//! An adapter needs one `use` and one export line:
//!
//! ```text
//! use wharf_adapter_sdk::prelude::*;
//!
//! struct Acme;
//! wharf_adapter_sdk::export_adapter!(Acme);
//!
//! impl Guest for Acme { /* describe, prepare, parse */ }
//! ```
//!
//! Everything but [`Request`](prelude::Request)'s methods (imports, which exist only inside the
//! host) builds and tests on the host target too.

pub mod bindings {
    //! Generated once here from `wit/adapter.wit` (`wharf:adapter@0.2.0`), so adapter crates need no `wit-bindgen` of
    //! their own; [`export_adapter!`](crate::export_adapter) finds these types by this path.
    wit_bindgen::generate!({
        path: "../../wit/adapter.wit",
        world: "adapter",
        pub_export_macro: true,
        export_macro_name: "export_adapter",
        default_bindings_module: "::wharf_adapter_sdk::bindings",
    });
}

mod decode;
mod digest;
mod results;
mod rfc3339;
mod spans;

pub use bindings::export_adapter;
pub use decode::*;
pub use digest::*;
pub use results::*;
pub use rfc3339::parse_rfc3339;
pub use spans::*;

/// `use wharf_adapter_sdk::prelude::*;` brings the `Guest` trait, the WIT types and every
/// helper into scope.
pub mod prelude {
    pub use crate::bindings::Guest;
    pub use crate::bindings::wharf::adapter::types::{
        Algorithm, Answer, AnswerPart, Check, Description, Envelope, Handshake, Method,
        ObjectVersion, Ordering, Parsed, Part, Prepared, PublicKeyEncoding, Rejection,
        RejectionKind, Request, SecretEncoding, Span, Tolerance,
    };
    pub use crate::decode::*;
    pub use crate::digest::*;
    pub use crate::results::*;
    pub use crate::rfc3339::parse_rfc3339;
    pub use crate::spans::*;
}
