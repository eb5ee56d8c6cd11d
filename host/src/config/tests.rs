//! Numeric knobs across tables: a value out of range is refused naming its key and the
//! range, a boundary value is accepted.

use super::testing::config_with;
use super::{RetentionConfig, ServerConfig, WorkerConfig};

#[test]
fn numeric_knobs_out_of_range_are_refused_naming_key_and_range() {
    for (table, line, message) in [
        (
            "endpoint",
            "tolerance_secs = 0",
            "tolerance_secs = 0 is out of range: allowed 1..=3600",
        ),
        (
            "endpoint",
            "tolerance_secs = 100000000",
            "tolerance_secs = 100000000 is out of range: allowed 1..=3600",
        ),
        (
            "endpoint",
            "future_tolerance_secs = 3601",
            "future_tolerance_secs = 3601 is out of range: allowed 0..=3600",
        ),
        (
            "endpoint",
            "max_body_bytes = 0",
            "max_body_bytes = 0 is out of range: allowed 1..=67108864",
        ),
        (
            "endpoint",
            "max_attempts = 0",
            "max_attempts = 0 is out of range: allowed 1..=100",
        ),
        (
            "endpoint",
            "rate_limit = { per_second = 0, burst = 1 }",
            "endpoint \"e\": rate_limit.per_second = 0 is out of range: allowed 0.001..=1000000",
        ),
        (
            "endpoint",
            "rate_limit = { per_second = -1, burst = 1 }",
            "endpoint \"e\": rate_limit.per_second = -1 is out of range",
        ),
        (
            "endpoint",
            "rate_limit = { per_second = inf, burst = 1 }",
            "endpoint \"e\": rate_limit.per_second = inf is out of range",
        ),
        (
            "endpoint",
            "rate_limit = { per_second = 10, burst = 0 }",
            "endpoint \"e\": rate_limit.burst = 0 is out of range: allowed 1..=1000000",
        ),
        (
            "endpoint",
            "rate_limit = { per_second = 10, burst = 1000001 }",
            "endpoint \"e\": rate_limit.burst = 1000001 is out of range: allowed 1..=1000000",
        ),
        (
            "database",
            "commit_timeout_ms = 2000",
            "[database] commit_timeout_ms = 2000 is out of range: allowed 1..=1900",
        ),
        (
            "database",
            "commit_timeout_ms = 0",
            "[database] commit_timeout_ms = 0 is out of range: allowed 1..=1900",
        ),
        (
            "server",
            "max_body_bytes = 0",
            "[server] max_body_bytes = 0 is out of range: allowed 1..=67108864",
        ),
        (
            "server",
            "max_body_bytes = 1099511627776",
            "[server] max_body_bytes = 1099511627776 is out of range",
        ),
        (
            "server",
            "header_timeout_ms = 0",
            "[server] header_timeout_ms = 0 is out of range: allowed 100..=300000",
        ),
        (
            "server",
            "body_timeout_ms = 50",
            "[server] body_timeout_ms = 50 is out of range: allowed 100..=600000",
        ),
        (
            "server",
            "max_connections = 0",
            "[server] max_connections = 0 is out of range: allowed 1..=100000",
        ),
        (
            "server",
            "max_buffered_bytes = 1000",
            "[server] max_buffered_bytes (at least max_body_bytes) = 1000 is out of range: allowed 1048576..=",
        ),
        (
            "server",
            "max_headers = 0",
            "[server] max_headers = 0 is out of range",
        ),
        (
            "adapters",
            "memory_mib = 0",
            "[adapters] memory_mib = 0 is out of range: allowed 1..=4096",
        ),
        (
            "adapters",
            "memory_mib = 17592186044416",
            "[adapters] memory_mib = 17592186044416 is out of range: allowed 1..=4096",
        ),
        (
            "adapters",
            "call_timeout_ms = 0",
            "[adapters] call_timeout_ms = 0 is out of range: allowed 1..=1000",
        ),
        (
            "adapters",
            "max_concurrency = 0",
            "[adapters] max_concurrency = 0 is out of range: allowed 1..=1024",
        ),
        (
            "adapters",
            "threads = 0",
            "[adapters] threads = 0 is out of range: allowed 1..=256",
        ),
        (
            "worker",
            "lease_secs = 0",
            "[worker] lease_secs = 0 is out of range: allowed 1..=3600",
        ),
        (
            "worker",
            "batch_size = 0",
            "[worker] batch_size = 0 is out of range: allowed 1..=1000",
        ),
        (
            "worker",
            "idle_poll_ms = 0",
            "[worker] idle_poll_ms = 0 is out of range: allowed 1..=60000",
        ),
        (
            "worker",
            "backoff_max_ms = 100000000000",
            "[worker] backoff_max_ms = 100000000000 is out of range",
        ),
    ] {
        let error = config_with(table, &format!("{line}\n"))
            .unwrap_err()
            .to_string();
        assert!(error.contains(message), "[{table}] {line}: {error}");
    }
}

#[test]
fn boundary_values_are_accepted() {
    for (table, line) in [
        (
            "endpoint",
            "tolerance_secs = 3600\nfuture_tolerance_secs = 0",
        ),
        ("endpoint", "max_body_bytes = 1"),
        (
            "endpoint",
            "rate_limit = { per_second = 1000000, burst = 1000000 }",
        ),
        ("endpoint", "rate_limit = { per_second = 0.001, burst = 1 }"),
        ("database", "commit_timeout_ms = 1900"),
        (
            "server",
            "max_body_bytes = 67108864\nmax_buffered_bytes = 67108864",
        ),
        ("adapters", "memory_mib = 4096"),
    ] {
        config_with(table, &format!("{line}\n")).unwrap_or_else(|e| panic!("{line}: {e}"));
    }
}

#[test]
fn a_declared_table_reads_as_a_derived_one_would() {
    // `Default` is the empty table.
    let empty = |table: &str| config_with("worker", &format!("\n[{table}]\n"));
    let config = empty("retention").unwrap();
    assert_eq!(
        format!("{:?}", config.retention),
        format!("{:?}", RetentionConfig::default())
    );
    assert_eq!(
        format!("{:?}", config.worker),
        format!("{:?}", WorkerConfig::default())
    );
    assert_eq!(
        config.server.listen,
        ServerConfig::default().listen,
        "{:?}",
        config.server
    );
    // serde's messages: unknown keys listed in field order, the table's type by name.
    let error = format!("{:#}", config_with("adapters", "bogus = 1\n").unwrap_err());
    assert!(
        error.contains(
            "unknown field `bogus`, expected one of `dir`, `cache_dir`, `memory_mib`, \
             `call_timeout_ms`, `max_concurrency`, `threads`"
        ),
        "{error}"
    );
    let error = format!("{:#}", config_with("server", "tls = 5\n").unwrap_err());
    assert!(error.contains("expected struct TlsConfig"), "{error}");
    let error = format!("{:#}", empty("nats").unwrap_err());
    assert!(error.contains("missing field `url`"), "{error}");
    let error = format!(
        "{:#}",
        config_with("worker", "lease_secs = \"x\"\n").unwrap_err()
    );
    assert!(
        error.contains("key `lease_secs`: invalid type: string (value withheld), expected u64"),
        "{error}"
    );
}

#[test]
fn trusted_keys_are_read_at_load_and_a_malformed_one_is_refused() {
    let key = "ed25519:".to_owned() + &"A".repeat(43) + "=";
    let config = config_with("adapters", &format!("trusted_keys = [\"{key}\"]")).unwrap();
    assert_eq!(config.adapters.trusted_keys.len(), 1);
    assert_eq!(config.adapters.trusted_keys[0].to_string(), key);
    assert!(
        config_with("adapters", "")
            .unwrap()
            .adapters
            .trusted_keys
            .is_empty()
    );
    for (bad, why) in [
        ("AAAA", "starts with \"ed25519:\""),
        ("ed25519:AAAA", "32 bytes, not 3"),
        ("ed25519:not base64!", "not base64"),
    ] {
        let error = config_with("adapters", &format!("trusted_keys = [\"{bad}\"]"))
            .unwrap_err()
            .to_string();
        assert!(error.contains(why), "{bad}: {error}");
    }
}
