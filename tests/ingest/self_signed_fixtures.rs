//! Self-signing fixtures (`[sign]` in request.toml): the runner computes the signature a
//! provider would send, so a case needs no hand-made MAC. Run through `wharf adapter test` on a
//! bundled adapter, as an author would.

use std::path::Path;

use crate::support::{files::*, process::*};

const STRIPE_BODY: &str = "valid/body";
const STRIPE_EXPECTED_ACCEPTED: &str = "valid/expected.toml";

/// A case folder: `request` as request.toml, Stripe's valid body, and `expected`.
fn case(dir: &Path, name: &str, request: &str, expected: &str) {
    let shipped = adapter_file("stripe.fixtures");
    let case = dir.join(name);
    std::fs::create_dir_all(&case).unwrap();
    std::fs::write(case.join("request.toml"), request).unwrap();
    std::fs::copy(shipped.join(STRIPE_BODY), case.join("body")).unwrap();
    std::fs::write(case.join("expected.toml"), expected).unwrap();
}

/// A Stripe request.toml signed by the runner, with extra `[sign]` lines.
fn stripe_request(now: i64, sign: &str) -> String {
    format!(
        r#"now = {now}
headers = [
  ["stripe-signature", "t={{timestamp}},v1={{signature}}"],
  ["content-type", "application/json; charset=utf-8"],
]

[sign]
over = "{{timestamp}}.{{body}}"
encoding = "hex"
{sign}

[[secret]]
version = "2026-11"
value = "whsec_test_stripe_2026_11"
"#
    )
}

fn adapter_test(fixtures: &Path) -> (bool, String) {
    let out = run_wharf(&[
        "adapter",
        "test",
        adapter_file("stripe.wasm").to_str().unwrap(),
        fixtures.to_str().unwrap(),
    ]);
    let shown = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), shown)
}

#[test]
fn self_signed_fixtures_for_a_bundled_adapter_pass_and_mean_what_they_say() {
    let dir = tempfile::tempdir().unwrap();
    let accepted =
        std::fs::read_to_string(adapter_file("stripe.fixtures").join(STRIPE_EXPECTED_ACCEPTED))
            .unwrap();
    let rejected = |code: &str| format!("outcome = \"rejected\"\ncode = \"{code}\"\n");
    // Signed at `now` itself, and at the shipped fixture's timestamp (the same MAC as its
    // hand-made header: the case passes only if the runner computed exactly that).
    case(
        dir.path(),
        "valid-now",
        &stripe_request(1764480010, ""),
        &accepted,
    );
    case(
        dir.path(),
        "valid-as-shipped",
        &stripe_request(1764480010, "timestamp = 1764480000"),
        &accepted,
    );
    case(
        dir.path(),
        "stale",
        &stripe_request(1764480301, "timestamp = 1764480000"),
        &rejected("stale_timestamp"),
    );
    case(
        dir.path(),
        "wrong-key",
        &stripe_request(1764480010, "key = \"whsec_not_the_endpoints\""),
        &rejected("invalid_signature"),
    );
    case(
        dir.path(),
        "flipped-body-byte",
        &stripe_request(1764480010, "body = \"{\\\"id\\\":\\\"evt_other\\\"}\""),
        &rejected("invalid_signature"),
    );
    let (ok, shown) = adapter_test(dir.path());
    assert!(ok, "{shown}");
    assert!(shown.contains("5 passed, 0 failed"), "{shown}");
}

#[test]
fn a_wrongly_signed_or_mistyped_self_signed_fixture_fails() {
    let dir = tempfile::tempdir().unwrap();
    let accepted =
        std::fs::read_to_string(adapter_file("stripe.fixtures").join(STRIPE_EXPECTED_ACCEPTED))
            .unwrap();
    // Expects acceptance, but is signed with another key: the host says why.
    case(
        dir.path(),
        "signed-with-another-key",
        &stripe_request(1764480010, "key = \"whsec_not_the_endpoints\""),
        &accepted,
    );
    // A placeholder that does not exist.
    case(
        dir.path(),
        "typo",
        &stripe_request(1764480010, "").replace("{signature}", "{sig}"),
        &accepted,
    );
    let (ok, shown) = adapter_test(dir.path());
    assert!(!ok, "{shown}");
    assert!(shown.contains("FAIL  signed-with-another-key"), "{shown}");
    assert!(shown.contains("+ code = \"invalid_signature\""), "{shown}");
    assert!(shown.contains("FAIL  typo"), "{shown}");
    assert!(shown.contains("unknown placeholder {sig}"), "{shown}");
    assert!(shown.contains("0 passed, 2 failed"), "{shown}");
}
