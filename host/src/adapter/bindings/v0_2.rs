//! `wharf:adapter@0.2.0` (`wit/adapter.wit`): the types the host works in.

use wasmtime::component::Resource;

use super::request::{GuestState, RequestView};

mod generated {
    wasmtime::component::bindgen!({
        path: "../wit/adapter.wit",
        world: "adapter",
        imports: { default: trappable },
        exports: { default: async },
        with: { "wharf:adapter/types.request": crate::adapter::bindings::request::RequestView },
    });
}

pub use generated::wharf::adapter::types::{
    Algorithm, Answer, AnswerPart, Check, Description, Envelope, Handshake, Method, ObjectVersion,
    Ordering, Parsed, Part, Prepared, PublicKeyEncoding, Rejection, RejectionKind, SecretEncoding,
    Span, Tolerance,
};
pub use generated::{Adapter, AdapterPre};

impl generated::wharf::adapter::types::Host for GuestState {}

impl generated::wharf::adapter::types::HostRequest for GuestState {
    super::request::shared_request_methods!();

    fn method(&mut self, req: Resource<RequestView>) -> wasmtime::Result<Method> {
        // Only POST and GET ever reach an adapter (the route serves nothing else).
        Ok(if self.request(&req)?.method == http::Method::GET {
            Method::Get
        } else {
            Method::Post
        })
    }

    fn query(&mut self, req: Resource<RequestView>) -> wasmtime::Result<Option<String>> {
        Ok(self.request(&req)?.query.clone())
    }

    fn setting(
        &mut self,
        req: Resource<RequestView>,
        name: String,
    ) -> wasmtime::Result<Option<String>> {
        Ok(self.request(&req)?.settings.get(&name).cloned())
    }
}
