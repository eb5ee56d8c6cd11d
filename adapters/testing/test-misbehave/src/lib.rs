//! Test-only adapter for the host's sandbox limits. `prepare` misbehaves as the request's
//! `x-misbehave` header says: `spin` (loops forever), `hog` (allocates without bound),
//! `trap` (panics), `recurse` (recurses without bound), `bloat` (returns a 1 MiB result),
//! `bloat100` (tries to return 100 MiB).
//! Never deploy it; `cargo xtask adapters` puts it under `dist/testing/`.

wit_bindgen::generate!({ path: "../../../wit", world: "adapter" });

use wharf::adapter::types::{Algorithm, Check, Ordering, Part, RejectionKind, SecretEncoding};

struct Adapter;
export!(Adapter);

/// Burns CPU forever; `black_box` keeps the optimiser from proving the loop useless.
fn spin() -> ! {
    let mut n = 0u64;
    loop {
        n = core::hint::black_box(n.wrapping_add(1));
    }
}

/// Keeps 1 MiB blocks alive and writes to every page until allocation fails (a trap).
fn hog() -> ! {
    let mut hoard: Vec<Vec<u8>> = Vec::new();
    loop {
        let mut block = vec![0u8; 1 << 20];
        for page in block.chunks_mut(4096) {
            page[0] = 1;
        }
        hoard.push(core::hint::black_box(block));
    }
}

/// Recurses until the guest's stack overflows (a trap).
fn recurse(depth: u64) -> u64 {
    // An exit the optimiser cannot see through, so the recursion stays real.
    if core::hint::black_box(depth) == u64::MAX {
        return 0;
    }
    let frame = core::hint::black_box([depth; 16]);
    recurse(depth + 1).wrapping_add(frame[3])
}

/// A result holding `size` bytes of literal message.
fn bloated(size: usize) -> Prepared {
    Prepared {
        checks: vec![Check {
            message: vec![Part::Literal(vec![b'x'; size]), Part::RawBody],
            signatures: vec![vec![0; 32]],
        }],
        timestamp: None,
    }
}

impl Guest for Adapter {
    fn describe() -> Description {
        Description {
            name: "test-misbehave".into(),
            version: "0.1.0".into(),
            event_types: Vec::new(),
            max_body_bytes: None,
            algorithm: Algorithm::HmacSha256,
            secret_encoding: SecretEncoding::Raw,
            tolerance: None,
            ordering: Ordering::None,
        }
    }

    fn prepare(req: &Request) -> Result<Prepared, Rejection> {
        match req.header("x-misbehave").as_deref() {
            Some(b"spin") => spin(),
            Some(b"hog") => hog(),
            Some(b"trap") => panic!("test-misbehave: deliberate panic"),
            Some(b"recurse") => {
                recurse(0);
                unreachable!()
            }
            Some(b"bloat") => Ok(bloated(1 << 20)),
            // Past the memory cap: the allocation fails inside the guest (a trap) before the
            // host ever sees a result.
            Some(b"bloat100") => Ok(bloated(100 << 20)),
            _ => Err(Rejection {
                kind: RejectionKind::InvalidSignature,
                detail: "set x-misbehave".into(),
            }),
        }
    }

    fn parse(_req: &Request) -> Result<Parsed, Rejection> {
        panic!("test-misbehave: nothing verifies, so parse is never reached")
    }
}
