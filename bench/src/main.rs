//! Wharf's benchmark (docs/performance.md, "End to end"):
//!
//!   cargo xtask bench               # build, then `wharf-bench run`: sweep, search, report
//!   cargo xtask bench --quick       # the same with short runs
//!   cargo xtask bench --smoke       # a few seconds against the debug build (CI)
//!   cargo run --release -p wharf-bench -- loadgen --rate 1000 --duration 30
//!
//! `run` starts `wharf dev --config` on fresh databases (the examples' demo secrets, which
//! `wharf serve` refuses; with a database named, `dev` serves like `serve`); `loadgen` drives
//! a Wharf that is already running (defaults: `examples/wharf.toml` and
//! `examples/secrets.toml`). Both are meant for loopback targets: a bounded benchmark, not a
//! stress tool.

mod events;
mod fields;
mod loadgen;
mod machine;
mod pgbench;
mod plot;
mod report;
mod senders;
mod sweep;
mod wharf;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{Args, Parser, Subcommand};

use events::{BodyContent, BodySizes};
use loadgen::LoadConfig;
use sweep::{Bench, Plan};

#[derive(Parser)]
#[command(
    name = "wharf-bench",
    about = "Wharf's load generator and end-to-end benchmark"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Runtime threads for the generator. One is cheapest: a second cost about twice the CPU
    /// per request in wake-ups between threads, on cores shared with Wharf and Postgres.
    #[arg(long, global = true, default_value_t = 1)]
    threads: usize,
}

#[derive(Subcommand)]
enum Command {
    /// Start Wharf on fresh databases, offer fixed rates, search the highest rate with p99
    /// under the bound, offer 2x and 3x that, measure Postgres's ceiling with pgbench, and
    /// write the report.
    Run(RunArgs),
    /// Offer a fixed rate to a running Wharf and print what came back.
    Loadgen(LoadArgs),
}

#[derive(Args)]
struct RunArgs {
    /// Short runs (5 to 10 s each, pgbench 5 s): a sweep in about three minutes.
    #[arg(long, conflicts_with = "smoke")]
    quick: bool,
    /// CI: 100/s for 3 s against the debug build, pgbench 2 s, report into a temporary
    /// folder; fails on transport errors, no 2xx, or a missing report or plot.
    #[arg(long)]
    smoke: bool,
    /// The binary under test (default: target/release/wharf, target/debug/wharf with --smoke).
    #[arg(long)]
    wharf: Option<PathBuf>,
    /// Where the report goes (default: bench/results, a temporary folder with --smoke).
    #[arg(long)]
    out: Option<PathBuf>,
    /// A database that exists, for CREATE DATABASE.
    #[arg(
        long,
        env = "WHARF_BENCH_DATABASE_URL",
        default_value = "postgres://postgres@127.0.0.1:5432/postgres"
    )]
    database_url: String,
    /// `[worker] count` for the Wharf under test.
    #[arg(long, default_value_t = 2)]
    workers: u32,
    /// Fixed rates to offer, requests per second.
    #[arg(long, value_delimiter = ',')]
    rates: Option<Vec<f64>>,
    /// Seconds per fixed rate (default 20; --quick 5).
    #[arg(long)]
    duration: Option<f64>,
    /// The fixed rate that runs longer, and for how long (default 2000 for 60 s; --quick 10 s).
    #[arg(long, default_value_t = 2000.0)]
    long_rate: f64,
    #[arg(long)]
    long_duration: Option<f64>,
    /// Seconds per search step (default 10; --quick 4).
    #[arg(long)]
    step_duration: Option<f64>,
    /// Search steps at most (default 6; --quick 4; 0 skips the search).
    #[arg(long)]
    max_steps: Option<u32>,
    /// Seconds at 2x and 3x the highest sustainable rate (default 60; --quick 10; 0 skips).
    #[arg(long)]
    overload_duration: Option<f64>,
    /// Seconds per pgbench run (default 20; --quick 5; --smoke 2); 0 skips pgbench.
    #[arg(long)]
    pgbench_duration: Option<u32>,
    #[arg(long, default_value_t = 64)]
    pgbench_clients: u32,
    #[arg(long, default_value_t = 50.0)]
    p99_bound_ms: f64,
    /// Share of requests that resend an earlier one byte for byte.
    #[arg(long, default_value_t = 0.02)]
    duplicates: f64,
    /// What fills the bodies: Stripe-style JSON, or a random string that does not compress.
    #[arg(long, value_enum, default_value_t = BodyContent::Json)]
    bodies: BodyContent,
    /// Share of requests signed with the wrong secret (expect 401).
    #[arg(long, default_value_t = 0.01)]
    bad_signatures: f64,
    /// The generator's connections at most (past them requests wait their turn in it).
    #[arg(long, default_value_t = DEFAULT_CONNECTIONS)]
    connections: usize,
}

#[derive(Args)]
struct LoadArgs {
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    url: String,
    #[arg(long, default_value = "stripe-demo")]
    endpoint: String,
    #[arg(long, default_value = "whsec_demo_stripe_current")]
    secret: String,
    /// Requests per second, each sent at its scheduled time.
    #[arg(long, default_value_t = 1000.0)]
    rate: f64,
    /// Seconds of load (ignored when --requests is given).
    #[arg(long, default_value_t = 10.0)]
    duration: f64,
    /// Send exactly this many requests at --rate.
    #[arg(long)]
    requests: Option<u64>,
    /// Every body this many bytes instead of the realistic mix (10 KiB mean, tail to 1 MiB).
    #[arg(long)]
    body_bytes: Option<usize>,
    /// What fills the bodies: Stripe-style JSON, or a random string that does not compress.
    #[arg(long, value_enum, default_value_t = BodyContent::Json)]
    bodies: BodyContent,
    /// Distinct provider objects the events are about.
    #[arg(long, default_value_t = 10_000)]
    objects: u32,
    #[arg(long, default_value_t = 0.0)]
    duplicates: f64,
    #[arg(long, default_value_t = 0.0)]
    bad_signatures: f64,
    #[arg(long, default_value_t = 10_000)]
    timeout_ms: u64,
    /// Requests in flight at most (default: 16,384, fewer if open files are limited).
    #[arg(long)]
    max_in_flight: Option<usize>,
    /// Connections open at once at most (past them requests wait their turn in the generator).
    #[arg(long, default_value_t = DEFAULT_CONNECTIONS)]
    connections: usize,
    /// Also write the JSON summary (per-second timeline included) here.
    #[arg(long)]
    json: Option<PathBuf>,
}

fn main() -> ExitCode {
    let _ = FILES.set(raise_fd_limit());
    let cli = Cli::parse();
    let runtime = if cli.threads <= 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(cli.threads)
            .enable_all()
            .build()
    }
    .expect("tokio runtime");
    let result = runtime.block_on(async {
        match cli.command {
            Command::Run(args) => run(args).await,
            Command::Loadgen(args) => standalone(args).await,
        }
    });
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("wharf-bench: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("bench/ lives in the repository")
        .to_path_buf()
}

async fn standalone(args: LoadArgs) -> anyhow::Result<ExitCode> {
    let requests = args
        .requests
        .unwrap_or((args.rate * args.duration).round() as u64);
    let config = LoadConfig {
        url: args.url,
        endpoint: args.endpoint,
        secret: args.secret,
        rate: args.rate,
        requests,
        sizes: args
            .body_bytes
            .map_or_else(BodySizes::realistic, BodySizes::Fixed),
        content: args.bodies,
        objects: args.objects,
        duplicate_share: args.duplicates,
        bad_signature_share: args.bad_signatures,
        timeout: Duration::from_millis(args.timeout_ms),
        max_in_flight: args.max_in_flight.unwrap_or_else(in_flight_cap),
        max_connections: args.connections.min(in_flight_cap()),
        seed: fastrand::u64(..),
    };
    eprintln!(
        "offering {:.0} requests/s, {requests} requests; bodies: {}, {}",
        config.rate,
        config.sizes.describe(),
        config.content.describe()
    );
    let summary = loadgen::run(config, false).await?;
    summary.print_human();
    let json = serde_json::to_string_pretty(&summary)?;
    if let Some(path) = args.json {
        std::fs::write(&path, &json).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(
        if summary.ok_2xx > 0 && summary.transport_errors.is_empty() {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        },
    )
}

async fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    let repo = repo();
    let (quick, smoke) = (args.quick, args.smoke);
    let pick = |given: Option<f64>, full: f64, quick_v: f64, smoke_v: f64| {
        given.unwrap_or(if smoke {
            smoke_v
        } else if quick {
            quick_v
        } else {
            full
        })
    };
    let duration = pick(args.duration, 20.0, 5.0, 3.0);
    let long = pick(args.long_duration, 60.0, 10.0, 3.0);
    let rates = args.rates.clone().unwrap_or(if smoke {
        vec![100.0]
    } else {
        vec![500.0, 1000.0, 2000.0, 3000.0]
    });
    let plan = Plan {
        fixed: rates
            .iter()
            .map(|&r| (r, if r == args.long_rate { long } else { duration }))
            .collect(),
        search: !smoke,
        step_secs: pick(args.step_duration, 10.0, 4.0, 2.0),
        max_steps: args.max_steps.unwrap_or(if quick {
            4
        } else if smoke {
            0
        } else {
            6
        }),
        overload: if smoke { vec![] } else { vec![2.0, 3.0] },
        overload_secs: pick(args.overload_duration, 60.0, 10.0, 2.0),
        pgbench_secs: args.pgbench_duration.unwrap_or(if smoke {
            2
        } else if quick {
            5
        } else {
            20
        }),
        pgbench_clients: args.pgbench_clients,
        p99_bound_ms: args.p99_bound_ms,
        warmup_requests: if smoke { 10 } else { 50 },
        duplicate_share: args.duplicates,
        bad_signature_share: args.bad_signatures,
        content: args.bodies,
        timeout: Duration::from_secs(10),
        connections: args.connections,
    };
    let profile = if smoke { "debug" } else { "release" };
    let binary = args
        .wharf
        .clone()
        .unwrap_or_else(|| repo.join("target").join(profile).join("wharf"));
    if !binary.is_file() {
        bail!(
            "{} not found: build it first (cargo build {}-p wharf --bin wharf), or run `cargo xtask bench`",
            binary.display(),
            if smoke { "" } else { "--release " }
        );
    }
    let scratch = std::env::temp_dir().join(format!("wharf-bench-{}", std::process::id()));
    let out = match (&args.out, smoke) {
        (Some(out), _) => out.clone(),
        (None, true) => scratch.join("results"),
        (None, false) => repo.join("bench/results"),
    };
    std::fs::create_dir_all(&out)?;
    let postgres = wharf::Postgres {
        admin_url: args.database_url.clone(),
    };
    let environment = environment(&repo, &binary, &postgres).await?;
    eprintln!("wharf-bench: {}", environment.machine_line());
    let setup = wharf::Setup {
        repo: repo.clone(),
        binary,
        workers: args.workers,
    };
    let outcome = Bench::new(setup, postgres, plan.clone(), scratch.clone())
        .execute()
        .await?;

    let stem = free_stem(&out, &environment.date);
    let (md_path, png_path, json_path) = (
        out.join(format!("{stem}.md")),
        out.join(format!("{stem}-latency.png")),
        out.join(format!("{stem}.json")),
    );
    let png_name = format!("{stem}-latency.png");
    let json_name = format!("{stem}.json");
    plot::latency_png(&png_path, &outcome.runs, plan.p99_bound_ms)?;
    std::fs::write(
        &json_path,
        serde_json::to_string_pretty(&report::Full {
            environment: &environment,
            outcome: &outcome,
        })?,
    )?;
    std::fs::write(
        &md_path,
        report::markdown(&environment, &plan, &outcome, &png_name, &json_name),
    )?;
    println!("report: {}", md_path.display());
    println!("plot:   {}", png_path.display());
    println!("data:   {}", json_path.display());
    match outcome.highest_sustainable {
        Some(rate) => println!("highest sustainable rate: {rate:.0}/s"),
        None => println!("no rate tried was sustainable"),
    }
    for c in &outcome.ceilings {
        println!(
            "postgres ceiling, {} row(s) per transaction: {:.0} rows/s",
            c.rows_per_transaction, c.rows_per_s
        );
    }

    let mut failures = Vec::new();
    if smoke {
        for r in &outcome.runs {
            if !r.load.transport_errors.is_empty() {
                failures.push(format!(
                    "{}: transport errors {:?}",
                    r.label, r.load.transport_errors
                ));
            }
            if r.load.ok_2xx == 0 {
                failures.push(format!("{}: no 2xx answer", r.label));
            }
            if !r.load.errors_by_status.is_empty() {
                eprintln!(
                    "wharf-bench: warning: {}: unexpected answers {:?}",
                    r.label, r.load.errors_by_status
                );
            }
        }
        if outcome.runs.is_empty() {
            failures.push("no run".into());
        }
        for path in [&md_path, &png_path, &json_path] {
            if std::fs::metadata(path).map_or(true, |m| m.len() == 0) {
                failures.push(format!("{} missing or empty", path.display()));
            }
        }
        if plan.pgbench_secs > 0 && outcome.ceilings.len() != 2 {
            failures.push("pgbench did not report".into());
        }
    }
    if failures.is_empty() {
        let _ = std::fs::remove_dir_all(scratch.join("pgbench-config"));
        for k in 1..=outcome.runs.len() {
            let _ = std::fs::remove_dir_all(scratch.join(format!("run-{k}")));
        }
        Ok(ExitCode::SUCCESS)
    } else {
        for f in &failures {
            eprintln!("wharf-bench: smoke failed: {f}");
        }
        eprintln!("wharf-bench: logs kept in {}", scratch.display());
        Ok(ExitCode::FAILURE)
    }
}

/// `<date>`, or `<date>-2`, `-3`, ... when a report of that name exists.
fn free_stem(out: &Path, date: &str) -> String {
    let mut stem = date.to_owned();
    let mut n = 1;
    while out.join(format!("{stem}.md")).exists() {
        n += 1;
        stem = format!("{date}-{n}");
    }
    stem
}

async fn environment(
    repo: &Path,
    binary: &Path,
    postgres: &wharf::Postgres,
) -> anyhow::Result<report::Environment> {
    let today = time::OffsetDateTime::now_utc().date();
    let date = format!(
        "{}-{:02}-{:02}",
        today.year(),
        u8::from(today.month()),
        today.day()
    );
    let command = std::env::var("WHARF_BENCH_COMMAND").unwrap_or_else(|_| {
        let args: Vec<String> = std::env::args().skip(1).collect();
        format!("cargo run --release -p wharf-bench -- {}", args.join(" "))
    });
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .arg("-C")
            .arg(repo)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
    };
    let commit = match git(&["rev-parse", "--short", "HEAD"]) {
        Some(c) => {
            let dirty = git(&["status", "--porcelain", "--untracked-files=no"])
                .is_some_and(|s| !s.is_empty());
            if dirty {
                format!("commit {c} with uncommitted changes")
            } else {
                format!("commit {c}")
            }
        }
        None => "an unknown commit".into(),
    };
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu_model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map_or("unknown CPU".into(), |m| m.trim().to_owned());
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let memory_gib = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        .unwrap_or(0.0)
        / 1024.0
        / 1024.0;
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .unwrap_or_default()
        .trim()
        .to_owned();
    let version = postgres
        .version()
        .await
        .context("Postgres must answer at --database-url")?;
    let postgres_version = version.split(" on ").next().unwrap_or(&version).to_owned();
    let settings = postgres.settings().await.unwrap_or_default();
    Ok(report::Environment {
        date,
        command,
        wharf_binary: binary
            .strip_prefix(repo)
            .unwrap_or(binary)
            .display()
            .to_string(),
        wharf_commit: commit,
        nproc: std::thread::available_parallelism().map_or(0, |n| n.get()),
        cpu_model,
        memory_gib,
        kernel,
        postgres: postgres_version,
        postgres_settings: settings,
    })
}

/// Many requests in flight need many sockets: raise the limit on open files as far as this
/// process may (as root, past the hard limit), and return the soft limit in force.
fn raise_fd_limit() -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit with a valid pointer to a local.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return 1024;
        }
        let wanted = libc::rlimit {
            rlim_cur: limit.rlim_max.max(1 << 18),
            rlim_max: limit.rlim_max.max(1 << 18),
        };
        if libc::setrlimit(libc::RLIMIT_NOFILE, &wanted) == 0 {
            return wanted.rlim_cur;
        }
        limit.rlim_cur = limit.rlim_max;
        if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) == 0 {
            return limit.rlim_cur;
        }
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit);
        limit.rlim_cur
    }
}

/// Requests in flight at most: 16,384, or fewer when open files are scarcer, leaving room
/// for connections that linger after their request timed out.
/// The generator's connections at most, by default: Wharf's default `max_connections`.
pub const DEFAULT_CONNECTIONS: usize = 1024;

pub fn in_flight_cap() -> usize {
    let files = *FILES.get().unwrap_or(&1024);
    (files as usize / 2).clamp(64, 16_384)
}

static FILES: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
