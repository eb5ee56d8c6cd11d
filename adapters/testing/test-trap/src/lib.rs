//! Test-only adapter for the host's sandbox limits:
//! `prepare` and `parse` panic (the host must see a trap).
//! Never deploy it; `cargo xtask adapters` puts it under `dist/testing/`.

wit_bindgen::generate!({ path: "../../../wit", world: "adapter" });

use wharf::adapter::types::{Algorithm, Ordering, SecretEncoding};

struct Adapter;
export!(Adapter);

/// Panics; with `panic = "abort"` on wasm this is an `unreachable` trap.
fn misbehave() -> ! {
    panic!("test-trap: deliberate panic")
}

impl Guest for Adapter {
    fn describe() -> Description {
        Description {
            name: "test-trap".into(),
            version: "0.1.0".into(),
            event_types: Vec::new(),
            max_body_bytes: None,
            algorithm: Algorithm::HmacSha256,
            secret_encoding: SecretEncoding::Raw,
            tolerance: None,
            ordering: Ordering::None,
        }
    }

    fn prepare(_req: &Request) -> Result<Prepared, Rejection> {
        misbehave()
    }

    fn parse(_req: &Request) -> Result<Parsed, Rejection> {
        misbehave()
    }
}
