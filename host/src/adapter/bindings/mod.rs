//! The host's bindings, one `bindgen!` per WIT package version it serves, and the host side of
//! the `request` resource a guest queries. The host works in 0.2's types (`v0_2`); a 0.1
//! component's results are converted into them beside its bindings (`v0_1`), so everything
//! above this module sees one contract.

use wasmtime::Store;
use wasmtime::component::{InstancePre, Resource};

use super::wasm_error::IntoAnyhow;

mod request;
mod v0_1;
mod v0_2;

pub use request::{GuestState, RequestView};

#[cfg(test)]
pub use v0_2::Tolerance;
pub use v0_2::{
    Algorithm, Answer, AnswerPart, Check, Description, Envelope, Handshake, Method, ObjectVersion,
    Ordering, Parsed, Part, Prepared, PublicKeyEncoding, Rejection, RejectionKind, SecretEncoding,
    Span,
};

/// The WIT package versions this host serves, as a component's `types` import names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WitVersion {
    V0_1,
    V0_2,
}

impl WitVersion {
    /// From the version on a component's `wharf:adapter/types@` import.
    pub fn from_import(version: &str) -> Option<Self> {
        if version.starts_with("0.1.") {
            Some(Self::V0_1)
        } else if version.starts_with("0.2.") {
            Some(Self::V0_2)
        } else {
            None
        }
    }

    /// The versions served, as `wharf adapter check` and refusals name them; any patch
    /// release of each is served too (`0.2.1` is read as `0.2.0`).
    pub const SERVED: &[&str] = &["0.1.0", "0.2.0"];

    /// The WIT packages served, as components name them: `wharf:adapter@0.1.0`, ...
    pub fn served_packages() -> Vec<String> {
        Self::SERVED
            .iter()
            .map(|v| format!("wharf:adapter@{v}"))
            .collect()
    }
}

/// Adds every served version's imports to the linker.
pub fn add_to_linker(linker: &mut wasmtime::component::Linker<GuestState>) -> anyhow::Result<()> {
    use wasmtime::component::HasSelf;
    v0_1::Adapter::add_to_linker::<_, HasSelf<_>>(linker, |s| s).into_anyhow()?;
    v0_2::Adapter::add_to_linker::<_, HasSelf<_>>(linker, |s| s).into_anyhow()?;
    Ok(())
}

/// A linked component of either version, ready to instantiate.
#[derive(Clone)]
pub enum GuestPre {
    V0_1(v0_1::AdapterPre<GuestState>),
    V0_2(v0_2::AdapterPre<GuestState>),
}

impl GuestPre {
    /// Checks the component's exports against its version's world.
    pub fn new(pre: InstancePre<GuestState>, version: WitVersion) -> anyhow::Result<Self> {
        Ok(match version {
            WitVersion::V0_1 => Self::V0_1(v0_1::AdapterPre::new(pre).into_anyhow()?),
            WitVersion::V0_2 => Self::V0_2(v0_2::AdapterPre::new(pre).into_anyhow()?),
        })
    }

    pub async fn instantiate_async(
        &self,
        store: &mut Store<GuestState>,
    ) -> wasmtime::Result<Guest> {
        Ok(match self {
            Self::V0_1(pre) => Guest::V0_1(pre.instantiate_async(store).await?),
            Self::V0_2(pre) => Guest::V0_2(pre.instantiate_async(store).await?),
        })
    }
}

/// One instance of a component, whichever version it targets; its exports answer in 0.2 types.
pub enum Guest {
    V0_1(v0_1::Adapter),
    V0_2(v0_2::Adapter),
}

impl Guest {
    pub async fn describe(&self, store: &mut Store<GuestState>) -> wasmtime::Result<Description> {
        Ok(match self {
            Self::V0_1(a) => a.call_describe(store).await?.into(),
            Self::V0_2(a) => a.call_describe(store).await?,
        })
    }

    /// `algorithm`: what a 0.1 component's checks are verified with (0.1 declares one
    /// algorithm for the whole adapter in `describe`; 0.2 names it in each check).
    pub async fn prepare(
        &self,
        store: &mut Store<GuestState>,
        req: Resource<RequestView>,
        algorithm: Algorithm,
    ) -> wasmtime::Result<Result<Prepared, Rejection>> {
        Ok(match self {
            Self::V0_1(a) => a
                .call_prepare(store, req)
                .await?
                .map(|p| v0_1::upgrade_prepared(p, algorithm))
                .map_err(Into::into),
            Self::V0_2(a) => a.call_prepare(store, req).await?,
        })
    }

    pub async fn parse(
        &self,
        store: &mut Store<GuestState>,
        req: Resource<RequestView>,
    ) -> wasmtime::Result<Result<Parsed, Rejection>> {
        Ok(match self {
            Self::V0_1(a) => a
                .call_parse(store, req)
                .await?
                .map(Into::into)
                .map_err(Into::into),
            Self::V0_2(a) => a.call_parse(store, req).await?,
        })
    }
}
