//! Test-only adapter for hot reload. GitHub's scheme (`X-Hub-Signature-256` over the body,
//! `X-GitHub-Delivery` as the event id), with a version string the hot-reload test rewrites
//! in a copy of the built file: `reload-vNN` serves; `reload-tNN` panics in `prepare`, so its
//! fixtures fail and it must never serve. Never deploy it.

wit_bindgen::generate!({ path: "../../../wit", world: "adapter" });
wharf_adapter_sdk::adapter_helpers!();

use wharf::adapter::types::{Algorithm, Check, Envelope, Ordering, Part, SecretEncoding};
use wharf_adapter_sdk as sdk;

/// Exactly ten bytes, unique in the component: the test patches them in place.
static VERSION: [u8; 10] = *b"reload-v00";

/// Read through `black_box`, so the optimiser cannot fold the bytes it sees at build time.
fn version() -> &'static [u8] {
    core::hint::black_box(&VERSION)
}

struct Adapter;
export!(Adapter);

impl Guest for Adapter {
    fn describe() -> Description {
        Description {
            name: "test-reload".into(),
            version: String::from_utf8_lossy(version()).into_owned(),
            event_types: Vec::new(),
            max_body_bytes: None,
            algorithm: Algorithm::HmacSha256,
            secret_encoding: SecretEncoding::Raw,
            tolerance: None,
            ordering: Ordering::None,
        }
    }

    fn prepare(req: &Request) -> Result<Prepared, Rejection> {
        if version().starts_with(b"reload-t") {
            panic!("test-reload: this version traps");
        }
        let header = signature_header(req, "x-hub-signature-256")?;
        let hex = header
            .strip_prefix(b"sha256=")
            .ok_or_else(|| invalid("expected sha256="))?;
        Ok(Prepared {
            checks: vec![Check {
                message: vec![Part::RawBody],
                signatures: vec![sdk::hex_decode(hex).ok_or_else(|| invalid("not hex"))?],
            }],
            timestamp: None,
        })
    }

    fn parse(req: &Request) -> Result<Parsed, Rejection> {
        let required = |name: &str| {
            req.header(name)
                .and_then(sdk::utf8_nonempty)
                .ok_or_else(|| malformed(&format!("missing or repeated {name}")))
        };
        Ok(Parsed::Events(vec![Envelope {
            event_id: required("x-github-delivery")?,
            event_type: required("x-github-event")?,
            object_id: None,
            object_version: None,
            created_at: None,
            route: None,
        }]))
    }
}
