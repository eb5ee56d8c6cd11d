//! Test-only adapter for hot reload. GitHub's scheme (`X-Hub-Signature-256` over the body,
//! `X-GitHub-Delivery` as the event id), with a version string the hot-reload test rewrites
//! in a copy of the built file: `reload-vNN` serves; `reload-tNN` panics in `prepare`, so its
//! fixtures fail and it must never serve. Never deploy it.

use wharf_adapter_sdk::*;

/// Exactly ten bytes, unique in the component: the test patches them in place.
static VERSION: [u8; 10] = *b"reload-v00";

/// Read through `black_box`, so the optimiser cannot fold the bytes it sees at build time.
fn version() -> &'static [u8] {
    core::hint::black_box(&VERSION)
}

struct TestReload;
export!(TestReload);

impl Adapter for TestReload {
    fn describe() -> Description {
        let version = String::from_utf8_lossy(version());
        Description::new(Algorithm::HmacSha256).version(version)
    }

    fn prepare(req: &Request) -> Result<Prepared, Rejection> {
        if version().starts_with(b"reload-t") {
            panic!("test-reload: this version traps");
        }
        let signature = prefixed_hex(req, "x-hub-signature-256", "sha256=")?;
        Ok(hmac_sha256(vec![Part::RawBody], vec![signature]).into())
    }

    fn parse(req: &Request) -> Result<Parsed, Rejection> {
        let id = required_header(req, "x-github-delivery")?;
        Ok(event(id, required_header(req, "x-github-event")?).into())
    }
}
