//! What a stranger's request costs the host's verification before its 401 (issue 30, finding
//! 4): a 1 MiB form body of `a&a&…` under a bogus Twilio signature (refused at the form's pair
//! cap), a form at the cap, and Ed25519 and ECDSA candidates over a 1 MiB body (public-key
//! work is bounded in bytes: Ed25519 hashes the message per candidate, ECDSA once).
//! Run: `cargo bench -p wharf --bench verify_costs`

use criterion::{Criterion, criterion_group, criterion_main};
use wharf::adapter::{Algorithm, Check, Part, Prepared};
use wharf::ingest::{Inputs, KeySet, PublicKey, TrustedKey, TrustedPublicKey, verify};

const URL: &str = "https://example.com/twilio";

/// A check whose candidates are all `signature` (a real signature of another message, so each
/// verification hashes the whole message before it fails).
fn check(
    algorithm: Algorithm,
    message: Vec<Part>,
    candidates: usize,
    signature: &[u8],
) -> Prepared {
    Prepared {
        checks: vec![Check {
            algorithm,
            key: None,
            message,
            signatures: vec![signature.to_vec(); candidates],
            body_sha256_param: None,
        }],
        timestamp: None,
    }
}

fn run(c: &mut Criterion, name: &str, keys: &KeySet, prepared: &Prepared, body: &[u8]) {
    let declared = [
        Algorithm::HmacSha1,
        Algorithm::Ed25519,
        Algorithm::EcdsaP256Sha256,
    ];
    let inputs = Inputs {
        body,
        url: Some(URL),
        query: None,
    };
    c.bench_function(name, |b| {
        b.iter(|| verify(&declared, &|_| keys, prepared, &inputs, false).is_err())
    });
}

fn costs(c: &mut Criterion) {
    let hmac = KeySet {
        secrets: vec![TrustedKey {
            version: "t1".into(),
            key: b"twilio-auth-token".to_vec(),
        }],
        public_keys: vec![],
    };
    let form = check(
        Algorithm::HmacSha1,
        vec![Part::Url, Part::SortedFormParams],
        1,
        &[7; 20],
    );
    let flood = "a&".repeat(512 << 10);
    run(c, "form_1MiB_a_amp_bogus", &hmac, &form, flood.as_bytes());
    let at_cap = vec!["Param=value"; 1024].join("&");
    run(c, "form_1024_pairs_bogus", &hmac, &form, at_cap.as_bytes());

    let ed = ed25519_dalek::SigningKey::from_bytes(&[3; 32]);
    let ecdsa = p256::ecdsa::SigningKey::from_slice(&[5; 32]).unwrap();
    let public = KeySet {
        secrets: vec![],
        public_keys: vec![
            TrustedPublicKey {
                version: "ed".into(),
                key: PublicKey::Ed25519(ed.verifying_key()),
            },
            TrustedPublicKey {
                version: "p256".into(),
                key: PublicKey::P256(*ecdsa.verifying_key()),
            },
        ],
    };
    let body = vec![b' '; 1 << 20];
    use ed25519_dalek::Signer as _;
    let ed_sig = ed.sign(b"another message").to_bytes();
    let p_sig: p256::ecdsa::Signature =
        p256::ecdsa::signature::Signer::sign(&ecdsa, b"another message");
    let p_sig = p_sig.to_bytes();
    for candidates in [1, 4] {
        let ed_check = check(Algorithm::Ed25519, vec![Part::RawBody], candidates, &ed_sig);
        run(
            c,
            &format!("ed25519_1MiB_{candidates}_candidates"),
            &public,
            &ed_check,
            &body,
        );
        let p_check = check(
            Algorithm::EcdsaP256Sha256,
            vec![Part::RawBody],
            candidates,
            &p_sig,
        );
        run(
            c,
            &format!("ecdsa_p256_1MiB_{candidates}_candidates"),
            &public,
            &p_check,
            &body,
        );
    }
}

criterion_group!(benches, costs);
criterion_main!(benches);
