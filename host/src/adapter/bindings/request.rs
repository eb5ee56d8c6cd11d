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
