//! The one-command benchmark: fixed rates, a search for the highest rate that keeps p99
//! under the bound, 2x and 3x that rate, and Postgres's own ceiling, each Wharf run on a
//! fresh database and a fresh process (so runs do not inherit each other's tables, backlog
//! or peak memory).

use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

use crate::events::{BodyContent, BodySizes};
use crate::loadgen::{self, LoadConfig, Summary};
use crate::pgbench::{self, Ceiling};
use crate::wharf::{self, Postgres, Setup, Usage};

#[derive(Debug, Clone)]
pub struct Plan {
    /// Fixed rates and how long each runs, in seconds.
    pub fixed: Vec<(f64, f64)>,
    pub search: bool,
    pub step_secs: f64,
    pub max_steps: u32,
    /// Offered at these multiples of the highest sustainable rate, each this long.
    pub overload: Vec<f64>,
    pub overload_secs: f64,
    pub pgbench_secs: u32,
    pub pgbench_clients: u32,
    pub p99_bound_ms: f64,
    pub warmup_requests: u64,
    pub duplicate_share: f64,
    pub bad_signature_share: f64,
    /// What fills the bodies past their envelope.
    pub content: BodyContent,
    pub timeout: Duration,
    /// The generator's connections at most.
    pub connections: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct RunResult {
    pub label: String,
    /// `fixed`, `search` or `overload`.
    pub phase: String,
    pub duration_s: f64,
    pub sustainable: bool,
    pub load: Summary,
    pub wharf: Usage,
}

#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub runs: Vec<RunResult>,
    /// The highest rate that ran with p99 under the bound and no error, if any.
    pub highest_sustainable: Option<f64>,
    pub ceilings: Vec<Ceiling>,
    pub body_mix: String,
    pub workers: u32,
}

pub struct Bench {
    pub setup: Setup,
    pub postgres: Postgres,
    pub plan: Plan,
    pub scratch: PathBuf,
    runs: Vec<RunResult>,
}

impl Bench {
    pub fn new(setup: Setup, postgres: Postgres, plan: Plan, scratch: PathBuf) -> Self {
        Self {
            setup,
            postgres,
            plan,
            scratch,
            runs: Vec::new(),
        }
    }

    pub async fn execute(mut self) -> anyhow::Result<Outcome> {
        for (rate, secs) in self.plan.fixed.clone() {
            self.one(rate, secs, "fixed").await?;
        }
        let highest = if self.plan.search {
            self.search().await?
        } else {
            self.runs
                .iter()
                .filter(|r| r.sustainable)
                .map(|r| r.load.offered_rate)
                .reduce(f64::max)
        };
        if let Some(rate) = highest.filter(|_| self.plan.overload_secs > 0.0) {
            for m in self.plan.overload.clone() {
                self.one(rate * m, self.plan.overload_secs, "overload")
                    .await?;
            }
        }
        let mut ceilings = Vec::new();
        if self.plan.pgbench_secs > 0 {
            let payload_bytes = self.plan.content.stored_bytes(&BodySizes::realistic());
            for rows in [1, 10] {
                eprintln!(
                    "== pgbench: {rows} row(s) per transaction, {} clients, {} s, payloads of {payload_bytes} bytes",
                    self.plan.pgbench_clients, self.plan.pgbench_secs
                );
                let c = pgbench::measure(
                    &self.setup,
                    &self.postgres,
                    &self.scratch,
                    rows,
                    payload_bytes,
                    self.plan.pgbench_clients,
                    self.plan.pgbench_secs,
                )
                .await?;
                eprintln!(
                    "   {:.0} transactions/s = {:.0} rows/s",
                    c.transactions_per_s, c.rows_per_s
                );
                ceilings.push(c);
            }
        }
        Ok(Outcome {
            runs: self.runs,
            highest_sustainable: highest,
            ceilings,
            body_mix: format!(
                "{}, {}",
                BodySizes::realistic().describe(),
                self.plan.content.describe()
            ),
            workers: self.setup.workers,
        })
    }

    /// Short steps at the rates `next_probe` picks; returns the highest sustainable rate.
    async fn search(&mut self) -> anyhow::Result<Option<f64>> {
        let mut steps = 0;
        loop {
            let tried: Vec<(f64, bool)> = self
                .runs
                .iter()
                .map(|r| (r.load.offered_rate, r.sustainable))
                .collect();
            match next_probe(&tried) {
                Some(rate) if steps < self.plan.max_steps => {
                    steps += 1;
                    self.one(rate, self.plan.step_secs, "search").await?;
                }
                _ => return Ok(Some(bracket(&tried).0).filter(|&r| r > 0.0)),
            }
        }
    }

    /// One Wharf, one database, one rate; returns whether it was sustainable.
    async fn one(&mut self, rate: f64, secs: f64, phase: &str) -> anyhow::Result<bool> {
        let k = self.runs.len() + 1;
        let label = format!("{phase} {rate:.0}/s");
        eprintln!("== run {k}: {label} for {secs:.0} s");
        let database = format!("wharf_bench_{}_{k}", std::process::id());
        let url = self.postgres.create(&database).await?;
        let dir = self.scratch.join(format!("run-{k}"));
        let result = self.measure(rate, secs, &url, &dir).await;
        self.postgres.drop(&database).await?;
        let (load, usage) = result.map_err(|e| {
            e.context(format!(
                "run {k} ({label}); Wharf's log: {}",
                dir.join("wharf.log").display()
            ))
        })?;
        load.print_human();
        eprintln!(
            "  wharf: {:.2} cores mean, peak {:.0} MiB; generator {:.2} cores, machine {:.2}; oldest pending max {}; backlog at end {}",
            usage.wharf_cpu_cores_mean,
            usage.peak_rss_mib,
            usage.generator_cores_mean,
            usage.machine_busy_cores_mean,
            usage
                .oldest_pending_db_max_s
                .map_or("-".into(), |s| format!("{s:.1} s")),
            usage.backlog_at_end.map_or("-".into(), |n| n.to_string()),
        );
        let sustainable = load.sustainable(self.plan.p99_bound_ms);
        self.runs.push(RunResult {
            label,
            phase: phase.to_owned(),
            duration_s: secs,
            sustainable,
            load,
            wharf: usage,
        });
        Ok(sustainable)
    }

    async fn measure(
        &self,
        rate: f64,
        secs: f64,
        url: &str,
        dir: &std::path::Path,
    ) -> anyhow::Result<(Summary, Usage)> {
        let mut running = wharf::start(&self.setup, dir, url).await?;
        let config = |rate: f64, requests: u64, seed: u64| LoadConfig {
            url: running.url.clone(),
            endpoint: "stripe-demo".into(),
            secret: "whsec_demo_stripe_current".into(),
            rate,
            requests,
            sizes: BodySizes::realistic(),
            content: self.plan.content,
            objects: 10_000,
            duplicate_share: self.plan.duplicate_share,
            bad_signature_share: self.plan.bad_signature_share,
            timeout: self.plan.timeout,
            max_in_flight: crate::in_flight_cap(),
            max_connections: self.plan.connections.min(crate::in_flight_cap()),
            seed,
        };
        if self.plan.warmup_requests > 0 {
            // Opens the connection pools and touches every code path once; not recorded.
            let warm = config(50.0, self.plan.warmup_requests, 1);
            loadgen::run(warm, true).await?;
        }
        let load = config(rate, (rate * secs).round() as u64, rate as u64 ^ 0x5eed);
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let (summary, usage) = tokio::join!(
            async {
                let summary = loadgen::run(load, false).await;
                let _ = stop.send(());
                summary
            },
            wharf::sample(&running, stopped),
        );
        running.stop();
        Ok((summary?, usage))
    }
}

/// The highest rate that held below the lowest that did not (0 when none held), and that
/// lowest failure (none when every rate held).
fn bracket(tried: &[(f64, bool)]) -> (f64, Option<f64>) {
    let failed = tried
        .iter()
        .filter(|(_, ok)| !ok)
        .map(|(r, _)| *r)
        .reduce(f64::min);
    let held = tried
        .iter()
        .filter(|(r, ok)| *ok && failed.is_none_or(|f| *r < f))
        .map(|(r, _)| *r)
        .reduce(f64::max)
        .unwrap_or(0.0);
    (held, failed)
}

/// The next rate to try: double past the highest when everything held, else bisect the
/// bracket to the nearest 10/s until it is within 5% (or 25/s).
fn next_probe(tried: &[(f64, bool)]) -> Option<f64> {
    let (lo, hi) = bracket(tried);
    let Some(hi) = hi else {
        let up = lo.max(100.0) * 2.0;
        return (up <= 50_000.0).then_some(up);
    };
    if hi - lo <= (lo * 0.05).max(25.0) {
        return None;
    }
    let mid = ((lo + hi) / 2.0 / 10.0).round() * 10.0;
    (mid > lo && mid < hi).then_some(mid)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the search against a receiver that holds up to `capacity`.
    fn search(fixed: &[f64], capacity: f64, max_steps: usize) -> (f64, Vec<f64>) {
        let mut tried: Vec<(f64, bool)> = fixed.iter().map(|&r| (r, r <= capacity)).collect();
        let mut probes = Vec::new();
        while let Some(rate) = next_probe(&tried) {
            if probes.len() == max_steps {
                break;
            }
            probes.push(rate);
            tried.push((rate, rate <= capacity));
        }
        (bracket(&tried).0, probes)
    }

    #[test]
    fn bisects_between_the_fixed_rates() {
        let (found, probes) = search(&[500.0, 1000.0, 2000.0, 3000.0], 2345.0, 6);
        assert_eq!(probes[0], 2500.0);
        assert!(
            (2345.0 * 0.94..=2345.0).contains(&found),
            "{found} after {probes:?}"
        );
    }

    #[test]
    fn doubles_when_every_rate_held_and_goes_down_when_none_did() {
        let (found, probes) = search(&[500.0, 1000.0, 2000.0, 3000.0], 7000.0, 6);
        assert_eq!(probes[..2], [6000.0, 12000.0]);
        assert!((6000.0..=7000.0).contains(&found), "{found}");
        let (found, _) = search(&[500.0, 1000.0], 180.0, 6);
        assert!((150.0..=180.0).contains(&found), "{found}");
        let (found, probes) = search(&[500.0], 10.0, 6);
        assert_eq!(found, 0.0, "{probes:?}");
    }

    #[test]
    fn a_lower_failure_wins_over_a_higher_success() {
        // 1,000 failed once though 2,000 held: the bracket is below 1,000.
        let tried = [(500.0, true), (1000.0, false), (2000.0, true)];
        assert_eq!(bracket(&tried), (500.0, Some(1000.0)));
        assert_eq!(next_probe(&tried), Some(750.0));
    }
}
