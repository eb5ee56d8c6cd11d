//! The one `bindgen!` of the host, for `wharf:adapter@0.1.0`, and the host side of the
//! `request` resource a guest queries. A future WIT version gets its own module beside this one,
//! converted into the same host types.

use std::sync::Arc;

use bytes::Bytes;
use wasmtime::StoreLimits;
use wasmtime::component::{Resource, ResourceTable};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

mod generated {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "adapter",
        imports: { default: trappable },
        exports: { default: async },
        with: { "wharf:adapter/types.request": crate::adapter::bindings::RequestView },
    });
}

pub use generated::wharf::adapter::types::{
    Algorithm, Check, Description, Envelope, Handshake, ObjectVersion, Ordering, Parsed, Part,
    Prepared, Rejection, RejectionKind, SecretEncoding,
};
pub use generated::{Adapter, AdapterPre};

/// The request as an adapter sees it: a host-owned resource the guest queries.
pub struct RequestView {
    pub endpoint_id: String,
    /// The endpoint's configured public URL plus the query string; never the Host header.
    pub url: Option<String>,
    pub headers: Arc<http::HeaderMap>,
    pub body: Bytes,
}

/// What one guest call's store holds.
pub struct GuestState {
    pub(super) table: ResourceTable,
    pub(super) wasi: WasiCtx,
    pub(super) limits: StoreLimits,
    /// Epoch ticks the current call may still run (set per call, counted down at each tick).
    pub(super) ticks_left: u64,
}

impl WasiView for GuestState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl generated::wharf::adapter::types::Host for GuestState {}

impl generated::wharf::adapter::types::HostRequest for GuestState {
    fn endpoint_id(&mut self, req: Resource<RequestView>) -> wasmtime::Result<String> {
        Ok(self.table.get(&req)?.endpoint_id.clone())
    }

    fn url(&mut self, req: Resource<RequestView>) -> wasmtime::Result<Option<String>> {
        Ok(self.table.get(&req)?.url.clone())
    }

    fn header(
        &mut self,
        req: Resource<RequestView>,
        name: String,
    ) -> wasmtime::Result<Option<Vec<u8>>> {
        let mut values = self.table.get(&req)?.headers.get_all(name.as_str()).iter();
        Ok(match (values.next(), values.next()) {
            (Some(one), None) => Some(one.as_bytes().to_vec()),
            _ => None,
        })
    }

    fn header_values(
        &mut self,
        req: Resource<RequestView>,
        name: String,
    ) -> wasmtime::Result<Vec<Vec<u8>>> {
        let view = self.table.get(&req)?;
        Ok(view
            .headers
            .get_all(name.as_str())
            .iter()
            .map(|v| v.as_bytes().to_vec())
            .collect())
    }

    fn headers(&mut self, req: Resource<RequestView>) -> wasmtime::Result<Vec<(String, Vec<u8>)>> {
        let view = self.table.get(&req)?;
        Ok(view
            .headers
            .iter()
            .map(|(k, v)| (k.as_str().to_owned(), v.as_bytes().to_vec()))
            .collect())
    }

    fn body_len(&mut self, req: Resource<RequestView>) -> wasmtime::Result<u64> {
        Ok(self.table.get(&req)?.body.len() as u64)
    }

    fn body(&mut self, req: Resource<RequestView>) -> wasmtime::Result<Vec<u8>> {
        Ok(self.table.get(&req)?.body.to_vec())
    }

    fn drop(&mut self, req: Resource<RequestView>) -> wasmtime::Result<()> {
        self.table.delete(req)?;
        Ok(())
    }
}
