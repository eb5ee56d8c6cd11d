//! `wharf adapter check` says which WIT package a file targets and whether this host serves
//! it: `wit` in its JSON for a served file, and a refusal naming both sides for one that
//! targets a version this host does not serve.

use crate::support::{files::*, process::*};

fn check(file: &std::path::Path) -> (bool, serde_json::Value, String) {
    let out = run_wharf(&["adapter", "check", file.to_str().unwrap()]);
    let json = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.success(), json, stderr)
}

#[test]
fn check_names_the_wit_package_of_0_1_and_0_2_files_and_what_the_host_serves() {
    for (file, wit) in [
        (adapter_file("stripe.wasm"), "wharf:adapter@0.2.0"),
        (
            repo_root().join("tests/fixtures/wit-0.1/stripe.wasm"),
            "wharf:adapter@0.1.0",
        ),
    ] {
        let (ok, json, stderr) = check(&file);
        assert!(ok, "{stderr}");
        assert_eq!(json["wit"], wit, "{json}");
        assert_eq!(json["wit_served"], true, "{json}");
        assert_eq!(
            json["host_serves"],
            serde_json::json!(["wharf:adapter@0.1.0", "wharf:adapter@0.2.0"])
        );
        assert!(
            stderr.contains(&format!("targets {wit}: served by this host")),
            "{stderr}"
        );
    }
}

#[test]
fn a_file_targeting_an_unserved_wit_version_is_named_as_such() {
    // Stripe's component with its `types` import renamed to a version no host serves yet
    // (same length, so the binary stays well formed).
    let bytes = std::fs::read(adapter_file("stripe.wasm")).unwrap();
    let (from, to) = (b"wharf:adapter/types@0.2.0", b"wharf:adapter/types@0.3.0");
    let mut patched = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i..].starts_with(from) {
            patched.extend_from_slice(to);
            i += from.len();
        } else {
            patched.push(bytes[i]);
            i += 1;
        }
    }
    assert_ne!(patched, bytes);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("future.wasm");
    std::fs::write(&file, patched).unwrap();
    let (ok, _, stderr) = check(&file);
    assert!(!ok, "{stderr}");
    assert!(
        stderr.contains("targets wharf:adapter@0.3.0; this host serves 0.1.0, 0.2.0"),
        "{stderr}"
    );
    assert!(stderr.contains("future.wasm"), "{stderr}");
}
