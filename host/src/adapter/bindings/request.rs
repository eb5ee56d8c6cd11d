//! The host side of what a guest touches: the `request` resource it queries and its store's
//! state. Shared by every WIT version's bindings.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use wasmtime::StoreLimits;
use wasmtime::component::{Resource, ResourceTable};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

/// The request as an adapter sees it: a host-owned resource the guest queries.
pub struct RequestView {
    pub endpoint_id: String,
    /// POST, or GET for an adapter that serves GET handshakes.
    pub method: http::Method,
    /// The endpoint's configured public URL plus the query string; never the Host header.
    pub url: Option<String>,
    /// The raw query string, without `?`.
    pub query: Option<String>,
    pub headers: Arc<http::HeaderMap>,
    pub body: Bytes,
    /// The endpoint's non-secret settings.
    pub settings: Arc<BTreeMap<String, String>>,
}

impl RequestView {
    /// The value of `name` when it appears exactly once (a repeated header is ambiguous).
    pub(super) fn header(&self, name: &str) -> Option<Vec<u8>> {
        let mut values = self.headers.get_all(name).iter();
        match (values.next(), values.next()) {
            (Some(one), None) => Some(one.as_bytes().to_vec()),
            _ => None,
        }
    }

    pub(super) fn header_values(&self, name: &str) -> Vec<Vec<u8>> {
        self.headers
            .get_all(name)
            .iter()
            .map(|v| v.as_bytes().to_vec())
            .collect()
    }

    pub(super) fn headers(&self) -> Vec<(String, Vec<u8>)> {
        self.headers
            .iter()
            .map(|(k, v)| (k.as_str().to_owned(), v.as_bytes().to_vec()))
            .collect()
    }
}

/// What one guest call's store holds.
pub struct GuestState {
    pub(crate) table: ResourceTable,
    pub(crate) wasi: WasiCtx,
    pub(crate) limits: StoreLimits,
    /// Epoch ticks the current call may still run (set per call, counted down at each tick).
    pub(crate) ticks_left: u64,
}

impl WasiView for GuestState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl GuestState {
    pub(super) fn request(&self, req: &Resource<RequestView>) -> wasmtime::Result<&RequestView> {
        Ok(self.table.get(req)?)
    }
}

/// The `request` methods every served WIT version shares, written once: each version's
/// `HostRequest` trait is its own type, so the impls are stamped out from here.
macro_rules! shared_request_methods {
    () => {
        fn endpoint_id(
            &mut self,
            req: wasmtime::component::Resource<RequestView>,
        ) -> wasmtime::Result<String> {
            Ok(self.request(&req)?.endpoint_id.clone())
        }

        fn url(
            &mut self,
            req: wasmtime::component::Resource<RequestView>,
        ) -> wasmtime::Result<Option<String>> {
            Ok(self.request(&req)?.url.clone())
        }

        fn header(
            &mut self,
            req: wasmtime::component::Resource<RequestView>,
            name: String,
        ) -> wasmtime::Result<Option<Vec<u8>>> {
            Ok(self.request(&req)?.header(&name))
        }

        fn header_values(
            &mut self,
            req: wasmtime::component::Resource<RequestView>,
            name: String,
        ) -> wasmtime::Result<Vec<Vec<u8>>> {
            Ok(self.request(&req)?.header_values(&name))
        }

        fn headers(
            &mut self,
            req: wasmtime::component::Resource<RequestView>,
        ) -> wasmtime::Result<Vec<(String, Vec<u8>)>> {
            Ok(self.request(&req)?.headers())
        }

        fn body_len(
            &mut self,
            req: wasmtime::component::Resource<RequestView>,
        ) -> wasmtime::Result<u64> {
            Ok(self.request(&req)?.body.len() as u64)
        }

        fn body(
            &mut self,
            req: wasmtime::component::Resource<RequestView>,
        ) -> wasmtime::Result<Vec<u8>> {
            Ok(self.request(&req)?.body.to_vec())
        }

        fn drop(
            &mut self,
            req: wasmtime::component::Resource<RequestView>,
        ) -> wasmtime::Result<()> {
            self.table.delete(req)?;
            Ok(())
        }
    };
}
pub(super) use shared_request_methods;
