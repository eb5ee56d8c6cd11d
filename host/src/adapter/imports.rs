//! Which imports a component may have, and which WIT package version it was built against.

use wasmtime::Engine;
use wasmtime::component::Component;

use super::bindings::WitVersion;

/// The interface every adapter imports (its `request` resource lives there); the version on
/// this import is how a component's WIT package version is told apart (see ARCHITECTURE.md).
const TYPES_INTERFACE: &str = "wharf:adapter/types@";

/// Import namespaces a component may use. Everything WASI that Rust's standard library links
/// is allowed because the host grants it nothing (empty context, zero clocks); sockets, HTTP
/// and anything unknown are refused at load time, before the component can serve.
const ALLOWED_IMPORTS: &[&str] = &[
    TYPES_INTERFACE,
    "wasi:cli/",
    "wasi:io/",
    "wasi:clocks/",
    "wasi:filesystem/",
    "wasi:random/",
];

fn import_allowed(name: &str) -> bool {
    ALLOWED_IMPORTS.iter().any(|p| name.starts_with(p))
}

/// Refuses imports off the allowlist; returns the WIT package the component targets.
pub(super) fn check_imports(
    engine: &Engine,
    component: &Component,
) -> anyhow::Result<(WitVersion, String)> {
    let ty = component.component_type();
    use wasmtime::component::types::ComponentItem;
    let refused: Vec<&str> = ty
        .imports(engine)
        // Type imports (the world's `use types.{request, ...}`) grant nothing; anything that
        // can be called or instantiated must come from an allowed interface.
        .filter(|(_, item)| !matches!(item.ty, ComponentItem::Type(_) | ComponentItem::Resource(_)))
        .map(|(name, _)| name)
        .filter(|name| !import_allowed(name))
        .collect();
    anyhow::ensure!(
        refused.is_empty(),
        "component imports what adapters may not use: {}",
        refused.join(", ")
    );
    let version = ty
        .imports(engine)
        .find_map(|(name, _)| name.strip_prefix(TYPES_INTERFACE))
        .ok_or_else(|| anyhow::anyhow!("component does not import {TYPES_INTERFACE}*"))?;
    let served = WitVersion::from_import(version).ok_or_else(|| {
        anyhow::anyhow!(
            "targets wharf:adapter@{version}; this host serves {} (and their patch releases): \
             build it with an SDK for one of those (docs/writing-an-adapter.md, \"Compatibility\")",
            WitVersion::SERVED.join(", ")
        )
    })?;
    Ok((served, format!("wharf:adapter@{version}")))
}

#[cfg(test)]
mod tests {
    use super::import_allowed;

    #[test]
    fn imports_allowlist() {
        for ok in [
            "wharf:adapter/types@0.1.0",
            "wasi:cli/environment@0.2.6",
            "wasi:io/streams@0.2.6",
            "wasi:filesystem/preopens@0.2.6",
        ] {
            assert!(import_allowed(ok), "{ok}");
        }
        for refused in [
            "wasi:sockets/tcp@0.2.6",
            "wasi:http/outgoing-handler@0.2.6",
            "acme:backdoor/api",
        ] {
            assert!(!import_allowed(refused), "{refused}");
        }
    }
}
