//! Numbers read from text reports: pgbench's summary lines and `/proc` files. Below both
//! `pgbench` and `machine`, which read them.

/// The first number after `prefix` on the line that starts with it (pgbench's summary lines,
/// `/proc/PID/status` fields).
pub fn field(output: &str, prefix: &str) -> Option<f64> {
    output
        .lines()
        .find_map(|l| l.strip_prefix(prefix))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn reads_tps_and_latency_from_pgbench_output() {
        let out = "latency average = 10.695 ms\ninitial connection time = 24.463 ms\ntps = 374.007631 (without initial connection time)\n";
        assert_eq!(super::field(out, "tps = "), Some(374.007631));
        assert_eq!(super::field(out, "latency average = "), Some(10.695));
    }
}
