//! `wharf adapter test` and `wharf adapter check`, run as an adapter author would: every
//! shipped adapter's fixtures pass through the host's real verification path with no
//! database, and a fixture whose expected outcome is wrong fails with a readable diff.
//! Fixtures are read only as plain files inside their folder, and within size limits.

use std::path::Path;
use std::process::Output;

use crate::support::{files::*, process::*};

/// `wharf adapter test WASM FIXTURES`.
fn adapter_test(wasm: &Path, fixtures: &Path) -> Output {
    run_wharf(&[
        "adapter",
        "test",
        wasm.to_str().unwrap(),
        fixtures.to_str().unwrap(),
    ])
}

/// `wharf adapter test` of Stripe's adapter on `fixtures`, which must fail: what it printed.
fn stripe_fixtures_fail(fixtures: &Path) -> String {
    let out = adapter_test(&adapter_file("stripe.wasm"), fixtures);
    let shown = text(&out);
    assert!(!out.status.success(), "{shown}");
    shown
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn every_shipped_adapter_passes_its_fixtures() {
    for name in [
        "stripe",
        "github",
        "standard-webhooks",
        "slack",
        "gitlab",
        "zoom",
        "meta",
        "square",
        "twilio",
        "discord",
        "sendgrid",
        "adyen",
        "testing/test-reload",
    ] {
        let wasm = adapter_file(&format!("{name}.wasm"));
        let fixtures = adapter_file(&format!("{name}.fixtures"));
        let out = adapter_test(&wasm, &fixtures);
        let shown = text(&out);
        assert!(out.status.success(), "{name}:\n{shown}");
        assert!(shown.contains(" 0 failed"), "{name}:\n{shown}");
        let cases = std::fs::read_dir(&fixtures).unwrap().count();
        assert!(
            shown.contains(&format!("{cases} passed")),
            "{name}: every case runs\n{shown}"
        );
    }
}

#[test]
fn a_wrong_expectation_fails_with_a_diff() {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&adapter_file("stripe.fixtures"), dir.path());
    let expected = dir.path().join("valid/expected.toml");
    let original = std::fs::read_to_string(&expected).unwrap();
    std::fs::write(&expected, original.replace("pi_123", "pi_999")).unwrap();
    let flipped = dir.path().join("stale-timestamp/expected.toml");
    std::fs::write(
        &flipped,
        "outcome = \"rejected\"\ncode = \"invalid_signature\"\n",
    )
    .unwrap();

    let shown = stripe_fixtures_fail(dir.path());
    assert!(shown.contains("FAIL  valid"), "{shown}");
    assert!(shown.contains("- object_id = \"pi_999\""), "{shown}");
    assert!(shown.contains("+ object_id = \"pi_123\""), "{shown}");
    assert!(shown.contains("FAIL  stale-timestamp"), "{shown}");
    assert!(shown.contains("- code = \"invalid_signature\""), "{shown}");
    assert!(shown.contains("+ code = \"stale_timestamp\""), "{shown}");
    assert!(shown.contains("ok    rolling-secret"), "{shown}");
    assert!(shown.contains("2 failed"), "{shown}");
    // The secret in the fixture is the author's own test secret, but the report still shows
    // only outcomes, never signature values.
    assert!(!shown.contains("v1="), "{shown}");
}

#[test]
fn an_empty_or_missing_fixtures_folder_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let wasm = adapter_file("github.wasm");
    let out = adapter_test(&wasm, dir.path());
    assert!(!out.status.success());
    assert!(text(&out).contains("no fixtures"), "{}", text(&out));
}

#[test]
fn check_refuses_what_is_not_an_adapter_component() {
    let dir = tempfile::tempdir().unwrap();
    // A core module, not a component.
    let module = dir.path().join("core.wasm");
    std::fs::write(&module, b"\0asm\x01\0\0\0").unwrap();
    let out = run_wharf(&["adapter", "check", module.to_str().unwrap()]);
    assert!(!out.status.success(), "{}", text(&out));
    // A valid component that exports nothing of the world.
    let empty = dir.path().join("empty.wasm");
    std::fs::write(&empty, b"\0asm\x0d\0\x01\0").unwrap();
    let out = run_wharf(&["adapter", "check", empty.to_str().unwrap()]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("wharf:adapter"), "{}", text(&out));
}

#[test]
fn fixtures_are_never_read_through_symlinks_nor_past_their_size_limits() {
    let dir = tempfile::tempdir().unwrap();
    let fixtures = dir.path().join("stripe.fixtures");
    copy_tree(&adapter_file("stripe.fixtures"), &fixtures);
    let secret_value = "whsec_never_shown_anywhere_0123456789";
    let secrets = dir.path().join("secrets.toml");
    std::fs::write(
        &secrets,
        format!("[[stripe]]\nversion = \"x\"\nvalue = \"{secret_value}\"\n"),
    )
    .unwrap();
    // A body linked to the secrets file. The case expects `invalid_signature`, which the
    // secrets file's text as a body would also give: followed, the link would pass.
    let body = fixtures.join("flipped-body-byte/body");
    std::fs::remove_file(&body).unwrap();
    std::os::unix::fs::symlink(&secrets, &body).unwrap();
    // A case folder that is a link to a passing case outside the fixtures folder.
    let outside = dir.path().join("outside");
    copy_tree(&adapter_file("stripe.fixtures/valid"), &outside);
    std::os::unix::fs::symlink(&outside, fixtures.join("linked-case")).unwrap();
    // An expected.toml past the 64 KiB limit (still a passing expectation, padded).
    let expected = fixtures.join("valid/expected.toml");
    let mut padded = std::fs::read_to_string(&expected).unwrap();
    while padded.len() <= 64 << 10 {
        padded.push_str("# padding padding padding padding padding padding padding\n");
    }
    std::fs::write(&expected, padded).unwrap();

    let shown = stripe_fixtures_fail(&fixtures);
    assert!(shown.contains("FAIL  flipped-body-byte"), "{shown}");
    assert!(shown.contains("body: is a symlink"), "{shown}");
    assert!(shown.contains("FAIL  linked-case"), "{shown}");
    assert!(shown.contains("the case folder is a symlink"), "{shown}");
    assert!(shown.contains("FAIL  valid"), "{shown}");
    assert!(
        shown.contains("expected.toml: larger than the 65536-byte limit"),
        "{shown}"
    );
    assert!(shown.contains("ok    rolling-secret"), "{shown}");
    assert!(shown.contains("3 failed"), "{shown}");
    assert!(!shown.contains(secret_value), "{shown}");

    // The fixtures folder itself may not be a symlink either.
    let linked_root = dir.path().join("linked.fixtures");
    std::os::unix::fs::symlink(&fixtures, &linked_root).unwrap();
    let out = adapter_test(&adapter_file("stripe.wasm"), &linked_root);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("is a symlink"), "{}", text(&out));
}
