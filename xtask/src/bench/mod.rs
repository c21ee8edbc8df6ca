//! `cargo xtask bench`: the operator measured on the local control plane. Prints a table
//! and writes the same figures as JSON to `target/bench/results.json`.
//!
//! Parts: create-to-StatefulSet and create-to-Running for one Database and for a burst
//! (full tier: real StatefulSet controller, scheduler and kwok Pods); the controller's
//! cold start; its memory, CPU and steady-state writes at several scales; the webhook's
//! cold start, latency and throughput, direct and through the API server; failover of a
//! replicated postgres Database on the real tier. Ends with the targets, met or missed.

mod apiserver_profile;
mod backup;
mod cluster;
mod comparison;
mod failover;
mod latency;
mod object_sizes;
mod procstat;
mod scale;
mod stats;
mod targets;
mod verbs;
mod webhook;

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::bail;
use serde_json::{Value, json};
use testenv::Options;

use self::cluster::{Bench, wait_until};
use self::latency::{Latency, Watches, measure};
use self::scale::{Scale, ScaleOptions, measure_scale};
use self::stats::round;
use self::targets::Target;
use self::webhook::{Requests, WebhookFigures};

/// The benchmark's options. With `--smoke`, every option not given takes its smoke
/// default (`SMOKE` below): the small run `cargo xtask test` makes.
#[derive(clap::Args)]
pub struct BenchArgs {
    /// A small, quick run (used by `cargo xtask test` so the benchmark cannot rot): the
    /// parts that need no real node, on 20 Databases; options given still apply.
    #[arg(long)]
    pub smoke: bool,
    /// Databases created at once in the burst.
    #[arg(long, default_value_t = 500, default_value_if("smoke", "true", "20"))]
    pub burst: usize,
    /// Database counts for the memory and CPU measurement.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "0,1000,10000",
        default_value_if("smoke", "true", "0,20")
    )]
    pub scale: Vec<usize>,
    /// Seconds to watch an idle controller at each scale.
    #[arg(long, default_value_t = 60, default_value_if("smoke", "true", "5"))]
    pub idle_seconds: u64,
    /// Failovers per replication mode (Async and Sync) in the failover part.
    #[arg(long, default_value_t = 20, default_value_if("smoke", "true", "1"))]
    pub failover_trials: usize,
    /// Engines the failover part runs, each with its own real node.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "postgres,mysql,mongodb",
        default_value_if("smoke", "true", "postgres")
    )]
    pub failover_engines: Vec<String>,
    /// MiB of generated data the backup part backs up and restores.
    #[arg(long, default_value_t = 1024, default_value_if("smoke", "true", "16"))]
    pub backup_mib: u64,
    /// Run only these parts (default: all; with `--smoke`, those that need no real
    /// node: the failover and backup parts run the same scenario steps
    /// (`testenv::toolkit`) as the real tier's tests, which run just before in `cargo
    /// xtask test`, and would add about five minutes to a suite that must fit CI's limit).
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value_if("smoke", "true", "latency,scale,webhook")
    )]
    pub only: Vec<Part>,
    /// In the scale part, log every request (reads too) in the audit log, so the
    /// breakdown shows the controller's reads per Database; the API server then also
    /// writes every request to the log, which slows it.
    #[arg(long)]
    pub audit_reads: bool,
    /// In the scale part, profile the API server's CPU for this many seconds while the
    /// Databases converge (from 5 s after the first creates; keep it shorter than the
    /// converge) and split it by request kind, with each kind's CPU per request. Needs
    /// `go`; the profile stays in `target/bench/apiserver-<count>.pprof`.
    #[arg(long)]
    pub apiserver_profile: Option<u64>,
    /// Measure the `controller` and `webhook` binaries in this directory instead of
    /// building the workspace's: two builds compared on one machine, one run each.
    #[arg(long)]
    pub binaries: Option<PathBuf>,
    /// Measure the comparison operator (`xtask/comparison`, controller-runtime, built
    /// with Go) in the controller's place: run the same parts with and without it to
    /// see the ratio.
    #[arg(long)]
    pub comparison: bool,
}

/// The parts of the benchmark, each on a control plane of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Part {
    /// Create to StatefulSet and to Running, single and burst; controller cold start.
    Latency,
    /// Controller memory, CPU and writes at each `--scale`.
    Scale,
    /// Webhook cold start, latency and throughput.
    Webhook,
    /// Failover of replicated Databases on real servers.
    Failover,
    /// Backup and restore throughput on a real server and object store.
    Backup,
}

impl BenchArgs {
    /// The quick run `cargo xtask test` makes: what `cargo xtask bench --smoke` runs.
    pub fn smoke() -> Self {
        Self::parsed(&["--smoke"])
    }

    /// The options `cargo xtask bench <args>` gives.
    fn parsed(args: &[&str]) -> Self {
        #[derive(clap::Parser)]
        struct Bench {
            #[command(flatten)]
            args: BenchArgs,
        }
        let command_line = std::iter::once("bench").chain(args.iter().copied());
        <Bench as clap::Parser>::parse_from(command_line).args
    }

    fn runs(&self, part: Part) -> bool {
        self.only.is_empty() || self.only.contains(&part)
    }
}

pub fn run(args: &BenchArgs) -> anyhow::Result<()> {
    let engines = args
        .failover_engines
        .iter()
        .map(|e| failover::case(e))
        .collect::<anyhow::Result<Vec<_>>>()?;
    ensure_prerequisites(args, &engines)?;
    let profile = if args.smoke { "debug" } else { "release" };
    let bin_dir = match &args.binaries {
        Some(dir) => dir.clone(),
        None => build(profile)?,
    };
    let bin_dir = if args.comparison {
        comparison::build(&bin_dir)?
    } else {
        bin_dir
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let figures = runtime.block_on(measure_parts(args, &bin_dir, &engines))?;
    let targets = targets::evaluate(
        figures.latency.as_ref(),
        &figures.scales,
        figures.webhook.as_ref(),
        &figures.failovers,
    );
    let mut json = figures.print_and_json(profile);
    print_targets(&targets);
    json["targets"] = targets.iter().map(Target::to_json).collect();
    write_results(args, &json)?;
    check_sane(figures.latency.as_ref(), &figures.scales)
}

/// Builds the control plane of the tier the chosen parts need, and the real tier's
/// images when a part runs real servers.
fn ensure_prerequisites(
    args: &BenchArgs,
    engines: &[&'static failover::EngineCase],
) -> anyhow::Result<()> {
    if args.runs(Part::Failover) || args.runs(Part::Backup) {
        crate::control_plane::ensure_built(crate::control_plane::Tier::Real)?;
        let mut images = failover::images(engines);
        images.extend(backup::IMAGES.iter().map(|i| (*i).to_owned()));
        crate::images::ensure_built(&images)?;
    } else {
        crate::control_plane::ensure_built(crate::control_plane::Tier::Full)?;
    }
    Ok(())
}

/// The figures of the parts that ran; a part that did not run is `None` or empty.
struct Figures {
    latency: Option<(Latency, Latency, Duration)>,
    verbs: Option<verbs::Verbs>,
    scales: Vec<Scale>,
    webhook: Option<WebhookFigures>,
    failovers: Vec<failover::Failover>,
    throughput: Option<backup::Throughput>,
}

/// Runs each chosen part in turn, with the binaries from `bin_dir`.
async fn measure_parts(
    args: &BenchArgs,
    bin_dir: &std::path::Path,
    engines: &[&'static failover::EngineCase],
) -> anyhow::Result<Figures> {
    let (burst, scales, idle) = if args.smoke {
        (20, vec![0, 20], 5)
    } else {
        (args.burst, args.scale.clone(), args.idle_seconds)
    };
    let (latency, verbs) = if args.runs(Part::Latency) {
        let (latency, verbs) = latency_run(bin_dir, burst).await?;
        (Some(latency), Some(verbs))
    } else {
        (None, None)
    };
    let mut scale_results = Vec::new();
    if args.runs(Part::Scale) {
        for count in scales {
            println!("bench: scale {count}");
            let options = ScaleOptions {
                idle_window: Duration::from_secs(idle),
                audit_reads: args.audit_reads,
                profile_seconds: args.apiserver_profile,
            };
            scale_results.push(measure_scale(bin_dir, count, &options).await?);
        }
    }
    let webhook = if args.runs(Part::Webhook) {
        println!("bench: webhook");
        Some(webhook::measure(bin_dir, &webhook_requests(args.smoke)).await?)
    } else {
        None
    };
    let failovers = if args.runs(Part::Failover) {
        println!("bench: failover");
        // The smoke run proves the part runs: one failover, asynchronous only.
        let modes: &[bool] = if args.smoke { &[false] } else { &[false, true] };
        failover::measure(bin_dir, args.failover_trials, engines, modes).await?
    } else {
        Vec::new()
    };
    let throughput = if args.runs(Part::Backup) {
        println!("bench: backup and restore of {} MiB", args.backup_mib);
        Some(backup::measure(bin_dir, args.backup_mib).await?)
    } else {
        None
    };
    Ok(Figures {
        latency,
        verbs,
        scales: scale_results,
        webhook,
        failovers,
        throughput,
    })
}

/// The webhook part's request counts: few in the smoke run, enough for a p99 otherwise.
fn webhook_requests(smoke: bool) -> Requests {
    if smoke {
        Requests {
            direct: 500,
            api_server: 100,
        }
    } else {
        Requests {
            direct: 20_000,
            api_server: 2_000,
        }
    }
}

impl Figures {
    /// Prints a table per part that ran and gives the same figures as JSON.
    fn print_and_json(&self, profile: &str) -> Value {
        let mut json = json!({"build": profile});
        if let Some((single, burst, cold_start)) = &self.latency {
            print_latency(single, burst, *cold_start);
            json["latency"] = latency_json(single, burst, *cold_start);
        }
        if let Some(verbs) = &self.verbs {
            print_verbs(verbs);
            json["new_object_by_verb"] = verbs.to_json();
        }
        if !self.scales.is_empty() {
            print_scales(&self.scales);
            json["scale"] = scales_json(&self.scales);
        }
        if let Some(webhook) = &self.webhook {
            print_webhook(webhook);
            json["webhook"] = webhook_json(webhook);
        }
        if !self.failovers.is_empty() {
            print_failovers(&self.failovers);
            json["failover"] = self
                .failovers
                .iter()
                .map(failover::Failover::to_json)
                .collect();
        }
        if let Some(throughput) = &self.throughput {
            print_throughput(throughput);
            json["backup"] = throughput.to_json();
        }
        json
    }
}

/// Where the benchmark writes what it keeps: `target/bench` in the workspace, wherever
/// it was started from.
fn output_dir() -> std::path::PathBuf {
    crate::workspace_root().join("target/bench")
}

/// Writes the figures to `target/bench/<name>.json` and says where.
fn write_results(args: &BenchArgs, json: &Value) -> anyhow::Result<()> {
    let out = output_dir();
    std::fs::create_dir_all(&out)?;
    let name = results_name(args);
    let file = out.join(format!("{name}.json"));
    std::fs::write(&file, serde_json::to_vec_pretty(json)?)?;
    println!("\nwrote {}", file.display());
    Ok(())
}

/// The results file's name: a partial run never overwrites a full run's figures.
fn results_name(args: &BenchArgs) -> String {
    if args.smoke {
        "smoke".to_owned()
    } else if args.only.is_empty() {
        "results".to_owned()
    } else {
        // A partial run never overwrites a full run's figures.
        let parts: Vec<String> = args
            .only
            .iter()
            .map(|p| format!("{p:?}").to_lowercase())
            .collect();
        format!("results-{}", parts.join("-"))
    }
}

fn print_throughput(t: &backup::Throughput) {
    let mib = backup::mib;
    println!(
        "\n| backup and restore (postgres 17, one instance) | dump MiB | stored MiB | s | MiB/s of dump |"
    );
    println!("| --- | --- | --- | --- | --- |");
    for (what, took) in [
        ("backup: ask to Succeeded", t.backup),
        ("restore: Job start to Running", t.restore),
    ] {
        println!(
            "| {what} | {:.1} | {:.1} | {:.1} | {:.1} |",
            mib(t.dump_bytes),
            mib(t.stored_bytes),
            took.as_secs_f64(),
            backup::mib_per_s(t.dump_bytes, took)
        );
    }
    println!("(table on disk: {:.1} MiB)", mib(t.table_bytes));
}

/// Builds the controller and webhook binaries; returns the folder holding them.
fn build(profile: &str) -> anyhow::Result<PathBuf> {
    let mut command = Command::new(env!("CARGO"));
    command.current_dir(crate::workspace_root()).args([
        "build",
        "--locked",
        "-p",
        "database-controller",
        "-p",
        "database-webhook",
        "--bins",
    ]);
    if profile == "release" {
        command.arg("--release");
    }
    if !command.status()?.success() {
        bail!("building the controller failed");
    }
    Ok(crate::workspace_root().join("target").join(profile))
}

/// Databases created one at a time, each once the one before runs: enough samples for
/// a p50 that holds still from run to run.
const SINGLE_CREATES: usize = 20;

/// Full tier: cold start, the single creates, a new StatefulSet by each write verb, then
/// the burst.
async fn latency_run(
    bin_dir: &std::path::Path,
    burst: usize,
) -> anyhow::Result<((Latency, Latency, Duration), verbs::Verbs)> {
    // Enough fake nodes for every burst Pod (110 Pods each).
    let nodes = burst.div_ceil(100).max(3);
    let bench = Bench::start(Options {
        nodes,
        ..Options::full()
    })
    .await?;
    let watches = Watches::start(&bench.client);
    bench.create_many("warm", 1, 1).await?;
    let spawned = Instant::now();
    let _controller = bench.spawn_controller(bin_dir)?;
    wait_until(Duration::from_secs(60), "first reconcile", || async {
        bench
            .metric("database_controller_reconciles_total")
            .await
            .is_some_and(|n| n >= 1.0)
    })
    .await?;
    let cold_start = spawned.elapsed();
    println!("bench: single creates");
    let mut singles = Vec::new();
    for i in 0..SINGLE_CREATES {
        singles.push(
            measure(
                &bench,
                &watches,
                &format!("single{i}"),
                1,
                1,
                Duration::from_secs(120),
            )
            .await?,
        );
    }
    let single = merge(&singles);
    println!("bench: a new StatefulSet by plain create and by server-side apply");
    let verbs = verbs::measure(&bench.client, "single0-0").await?;
    println!("bench: burst of {burst}");
    let burst = measure(
        &bench,
        &watches,
        "burst",
        burst,
        100,
        Duration::from_secs(600),
    )
    .await?;
    Ok(((single, burst, cold_start), verbs))
}

/// Folds several one-Database runs into one summary.
fn merge(runs: &[Latency]) -> Latency {
    let pick = |f: fn(&Latency) -> f64| {
        runs.iter()
            .map(f)
            .map(|ms| Duration::from_secs_f64(ms / 1000.0))
            .collect::<Vec<_>>()
    };
    #[allow(clippy::cast_precision_loss)]
    let throughput = runs.iter().map(|r| r.throughput).sum::<f64>() / runs.len().max(1) as f64;
    Latency {
        count: runs.len(),
        create_call: stats::Summary::of(&pick(|r| r.create_call.p50)),
        to_statefulset: stats::Summary::of(&pick(|r| r.to_statefulset.p50)),
        to_running: stats::Summary::of(&pick(|r| r.to_running.p50)),
        ready_to_running: stats::Summary::of(&pick(|r| r.ready_to_running.p50)),
        pod_ready_to_running: stats::Summary::of(&pick(|r| r.pod_ready_to_running.p50)),
        throughput,
        wall_seconds: runs.iter().map(|r| r.wall_seconds).fold(0.0, f64::max),
    }
}

fn print_latency(single: &Latency, burst: &Latency, cold_start: Duration) {
    println!("\n| measurement | count | p50 ms | p95 ms | max ms |");
    println!("| --- | --- | --- | --- | --- |");
    for (label, l) in [("one at a time", single), ("burst", burst)] {
        for (what, s) in [
            ("API server create call", l.create_call),
            ("create to StatefulSet", l.to_statefulset),
            ("create to Running", l.to_running),
            ("StatefulSet ready to Running", l.ready_to_running),
            ("Pod ready to Running", l.pod_ready_to_running),
        ] {
            println!(
                "| {what} ({label}) | {} | {:.1} | {:.1} | {:.1} |",
                s.count, s.p50, s.p95, s.max
            );
        }
    }
    println!(
        "\nburst throughput: {:.1} Databases/s ({} created at once)",
        burst.throughput, burst.count
    );
    println!(
        "controller cold start (process start to first reconcile): {:.0} ms",
        cold_start.as_secs_f64() * 1000.0
    );
}

fn print_verbs(verbs: &verbs::Verbs) {
    println!("\n| a new StatefulSet, by verb | count | p50 ms | p95 ms | max ms |");
    println!("| --- | --- | --- | --- | --- |");
    for (verb, s) in [
        ("plain create", verbs.create),
        ("server-side apply", verbs.apply),
    ] {
        println!(
            "| {verb} | {} | {:.1} | {:.1} | {:.1} |",
            s.count, s.p50, s.p95, s.max
        );
    }
}

fn print_scales(scales: &[Scale]) {
    println!(
        "\n| Databases | converge s | writes per Database | API server + etcd CPU s per 1,000 | RSS peak MiB | RSS idle MiB | CPU s reconciling | CPU s idle (window) | writes/min idle |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for s in scales {
        println!(
            "| {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.2} | {:.2} ({:.0} s) | {:.1} |",
            s.databases,
            s.converge_seconds,
            s.writes_per_database,
            s.server_cpu_per_thousand,
            s.rss_peak_mib,
            s.rss_idle_mib,
            s.cpu_reconciling_seconds,
            s.cpu_idle_seconds,
            s.idle_window_seconds,
            s.steady_writes_per_minute
        );
    }
    for s in scales.iter().filter(|s| !s.writes_by_request.is_empty()) {
        let parts: Vec<String> = s
            .writes_by_request
            .iter()
            .map(|(request, per)| format!("{request} {per:.2}"))
            .collect();
        println!(
            "\nthe controller's requests per Database at {}, as the audit log has them: {}",
            s.databases,
            parts.join(", ")
        );
    }
    for s in scales {
        object_sizes::print(s.databases, &s.object_sizes);
        if let Some(breakdown) = &s.apiserver {
            breakdown.print(s.databases);
        }
    }
}

fn print_webhook(webhook: &WebhookFigures) {
    println!(
        "\nwebhook cold start (process start to /readyz over TLS): {:.0} ms",
        webhook.cold_start.as_secs_f64() * 1000.0
    );
    println!(
        "\n| webhook admission | concurrency | requests | p50 ms | p99 ms | max ms | requests/s |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    for load in &webhook.loads {
        println!(
            "| {} | {} | {} | {:.3} | {:.3} | {:.3} | {:.0} |",
            load.route.label(),
            load.concurrency,
            load.latency.count,
            load.latency.p50,
            load.latency.p99,
            load.latency.max,
            load.per_second
        );
    }
}

fn print_failovers(failovers: &[failover::Failover]) {
    println!(
        "\n| failover (3 instances, primary's Pod killed) | engine | mode | bound s | trials | p50 s | p95 s | max s |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
    for f in failovers {
        for (what, s) in [
            ("kill to new primary in status", f.to_primary),
            (
                "writes unavailable (longest gap between acknowledged writes)",
                f.unavailable,
            ),
        ] {
            println!(
                "| {what} | {} | {} | {} | {} | {:.1} | {:.1} | {:.1} |",
                f.engine,
                f.mode,
                f.bound.as_secs(),
                s.count,
                s.p50 / 1000.0,
                s.p95 / 1000.0,
                s.max / 1000.0
            );
        }
    }
    for f in failovers {
        println!(
            "{} {} mode: {} of {} acknowledged writes lost over {} failovers",
            f.engine, f.mode, f.lost, f.acknowledged, f.to_primary.count
        );
    }
}

fn print_targets(targets: &[Target]) {
    println!("\n| target | measured | met |");
    println!("| --- | --- | --- |");
    for target in targets {
        println!(
            "| {} | {} | {} |",
            target.name,
            target.measured,
            if target.met { "yes" } else { "MISSED" }
        );
    }
}

fn webhook_json(webhook: &WebhookFigures) -> Value {
    json!({
        "cold_start_ms": round(webhook.cold_start.as_secs_f64() * 1000.0),
        "loads": webhook.loads.iter().map(|l| json!({
            "route": l.route.label(), "concurrency": l.concurrency,
            "latency": l.latency.to_json(), "requests_per_second": round(l.per_second),
        })).collect::<Vec<_>>(),
    })
}

fn latency_json(single: &Latency, burst: &Latency, cold_start: Duration) -> Value {
    let latency = |l: &Latency| {
        json!({"count": l.count, "create_call": l.create_call.to_json(), "create_to_statefulset": l.to_statefulset.to_json(),
               "create_to_running": l.to_running.to_json(),
               "statefulset_ready_to_running": l.ready_to_running.to_json(),
               "pod_ready_to_running": l.pod_ready_to_running.to_json(),
               "throughput_per_second": round(l.throughput), "wall_seconds": round(l.wall_seconds)})
    };
    json!({
        "single": latency(single),
        "burst": latency(burst),
        "controller_cold_start_ms": round(cold_start.as_secs_f64() * 1000.0),
    })
}

fn scales_json(scales: &[Scale]) -> Value {
    scales.iter().map(|s| json!({
        "databases": s.databases, "converge_seconds": round(s.converge_seconds),
        "rss_peak_mib": round(s.rss_peak_mib), "rss_idle_mib": round(s.rss_idle_mib),
        "cpu_reconciling_seconds": round(s.cpu_reconciling_seconds), "cpu_idle_seconds": round(s.cpu_idle_seconds),
        "idle_window_seconds": s.idle_window_seconds, "steady_writes_per_minute": round(s.steady_writes_per_minute),
        "writes_per_database": round(s.writes_per_database), "server_cpu_seconds_per_thousand": round(s.server_cpu_per_thousand),
        "writes_by_request": s.writes_by_request.iter().map(|(r, per)| json!({"request": r, "per_database": round(*per)})).collect::<Vec<_>>(),
        "apiserver_cpu_by_kind": s.apiserver.as_ref().map(apiserver_profile::Breakdown::to_json),
        "object_sizes": s.object_sizes.iter().map(|k| json!({"kind": k.kind, "sampled": k.sampled, "bytes": round(k.bytes), "managed_fields_bytes": round(k.managed_fields_bytes)})).collect::<Vec<_>>(),
    })).collect()
}

/// The figures must at least be possible: everything measured, nothing negative.
fn check_sane(
    latency: Option<&(Latency, Latency, Duration)>,
    scales: &[Scale],
) -> anyhow::Result<()> {
    if let Some((single, burst, _)) = latency
        && (single.to_running.count == 0 || burst.to_running.count != burst.count)
    {
        bail!("some Databases were not measured");
    }
    if scales.iter().any(|s| s.rss_idle_mib <= 0.0) {
        bail!("controller memory could not be read");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{BenchArgs, Part};

    fn parse(args: &[&str]) -> BenchArgs {
        BenchArgs::parsed(args)
    }

    #[test]
    fn the_smoke_flag_selects_the_small_run_of_the_test_command() {
        let smoke = parse(&["--smoke"]);
        assert!(smoke.smoke);
        assert_eq!(smoke.only, [Part::Latency, Part::Scale, Part::Webhook]);
        assert_eq!(smoke.scale, [0, 20]);
        assert_eq!((smoke.burst, smoke.idle_seconds), (20, 5));
        assert_eq!((smoke.failover_trials, smoke.backup_mib), (1, 16));
        assert_eq!(smoke.failover_engines, ["postgres"]);
        assert_eq!(BenchArgs::smoke().only, smoke.only);
    }

    #[test]
    fn options_given_with_the_smoke_flag_still_apply() {
        let smoke = parse(&["--smoke", "--only", "failover", "--burst", "50"]);
        assert_eq!(smoke.only, [Part::Failover]);
        assert_eq!(smoke.burst, 50);
        assert_eq!(smoke.failover_trials, 1);
    }

    #[test]
    fn without_the_smoke_flag_every_part_runs_at_full_size() {
        let full = parse(&[]);
        assert!(full.only.is_empty());
        assert_eq!(full.scale, [0, 1000, 10000]);
        assert_eq!(
            (full.burst, full.failover_trials, full.backup_mib),
            (500, 20, 1024)
        );
        assert_eq!(full.failover_engines, ["postgres", "mysql", "mongodb"]);
    }
}
