//! The command line as CI and the docs use it. (Also makes `cargo test --workspace` build the
//! `wharf-bench` binary, so the CI smoke runs it without a second build.)

use std::process::Command;

fn bench() -> Command {
    Command::new(env!("CARGO_BIN_EXE_wharf-bench"))
}

#[test]
fn loadgen_counts_refused_connections_as_transport_errors_and_fails() {
    // Nothing listens on the discard port of the loopback interface.
    let out = bench()
        .args(["loadgen", "--url", "http://127.0.0.1:9", "--rate", "100"])
        .args(["--requests", "5", "--timeout-ms", "2000"])
        .output()
        .expect("runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{stdout}");
    assert!(
        stdout.contains("5 sent (0 not sent), 0 answered"),
        "{stdout}"
    );
    assert!(stdout.contains("error: connect"), "{stdout}");
}

#[test]
fn run_documents_its_modes() {
    let out = bench().args(["run", "--help"]).output().expect("runs");
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    for option in ["--quick", "--smoke", "--wharf", "--rates", "--workers"] {
        assert!(help.contains(option), "{option} missing from\n{help}");
    }
}
