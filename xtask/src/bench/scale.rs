//! The controller's memory and CPU with many Databases, while they are created and once
//! they are all Running, and its write calls in steady state.

use std::path::Path;
use std::time::{Duration, Instant};

use testenv::Options;
use testenv::process::Process;

use super::apiserver_profile::{self, Breakdown};
use super::cluster::{Bench, fake_readiness, wait_until};
use super::latency::{Watches, measure};
use super::object_sizes::{self, KindSize};
use super::procstat::{cpu_seconds, rss_mib};

pub struct Scale {
    pub databases: usize,
    pub converge_seconds: f64,
    pub rss_peak_mib: f64,
    pub rss_idle_mib: f64,
    pub cpu_reconciling_seconds: f64,
    pub cpu_idle_seconds: f64,
    pub idle_window_seconds: f64,
    pub steady_writes_per_minute: f64,
    /// The controller's write requests while the Databases converged, per Database.
    pub writes_per_database: f64,
    /// Those writes by verb and resource (`create secrets`, `patch databases/status`),
    /// per Database, most first: where the API server's work goes. With
    /// `--audit-reads`, the reads too (`get secrets`, `list pods`).
    pub writes_by_request: Vec<(String, f64)>,
    /// CPU seconds of the API server and etcd while they converged, per 1,000
    /// Databases (the benchmark's creates and readiness writes included, as they are
    /// for any controller measured this way).
    pub server_cpu_per_thousand: f64,
    /// With `--apiserver-profile`, the API server's CPU by kind during the converge.
    pub apiserver: Option<Breakdown>,
    /// The size of the Databases and the objects they own, once converged.
    pub object_sizes: Vec<KindSize>,
}

/// How one scale run is measured.
pub struct ScaleOptions {
    /// How long to watch the controller idle after the converge.
    pub idle_window: Duration,
    /// Log reads too in the audit log.
    pub audit_reads: bool,
    /// Profile the API server for this many seconds while the Databases converge.
    pub profile_seconds: Option<u64>,
}

/// How long after the first creates the profile starts: past the start-up of the
/// controller's watches, into the steady converge.
const PROFILE_DELAY: Duration = Duration::from_secs(5);

/// Runs on the apiserver-only tier with StatefulSet readiness written by the benchmark
/// (thousands of fake Pods would measure kwok, not the controller).
pub async fn measure_scale(
    bin_dir: &Path,
    databases: usize,
    scale: &ScaleOptions,
) -> anyhow::Result<Scale> {
    let idle_window = scale.idle_window;
    let (bench, readiness, controller) = start(bin_dir, scale).await?;
    let pid = controller.pid();
    let cpu_start = cpu_seconds(pid).unwrap_or(0.0);
    let server_cpu_start = server_cpu(&bench);
    let writes_start = bench.controller_writes();
    let kinds_start = bench.controller_writes_by_request();
    let started = Instant::now();
    let converging = async {
        let peak = converge(&bench, pid, databases).await?;
        Ok::<_, anyhow::Error>((
            peak,
            started.elapsed().as_secs_f64(),
            cpu_seconds(pid).unwrap_or(0.0) - cpu_start,
            server_cpu(&bench) - server_cpu_start,
        ))
    };
    let (converged, window) = tokio::join!(converging, profile(&bench, databases, scale));
    let (peak, converge_seconds, cpu_reconciling_seconds, server_cpu_seconds) = converged?;
    let converge_writes = bench.controller_writes() - writes_start;
    let by_request = since(bench.controller_writes_by_request(), kinds_start);
    let apiserver = window.transpose()?.map(|w| w.split()).transpose()?;

    // Let the last status writes and their watch echoes settle, then watch it idle.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let writes_before = bench.controller_writes();
    let cpu_before = cpu_seconds(pid).unwrap_or(0.0);
    tokio::time::sleep(idle_window).await;
    let writes = bench.controller_writes() - writes_before;
    let cpu_idle_seconds = cpu_seconds(pid).unwrap_or(0.0) - cpu_before;
    let rss_idle_mib = rss_mib(pid).unwrap_or(0.0);
    let object_sizes = object_sizes::measure(&bench.client).await?;
    readiness.abort();
    drop(controller);
    #[allow(clippy::cast_precision_loss)]
    let steady_writes_per_minute = writes as f64 * 60.0 / idle_window.as_secs_f64();
    #[allow(clippy::cast_precision_loss)]
    let per = |total: f64| total / databases.max(1) as f64;
    Ok(Scale {
        databases,
        converge_seconds,
        rss_peak_mib: peak.max(rss_idle_mib),
        rss_idle_mib,
        cpu_reconciling_seconds,
        cpu_idle_seconds,
        idle_window_seconds: idle_window.as_secs_f64(),
        steady_writes_per_minute,
        #[allow(clippy::cast_precision_loss)]
        writes_per_database: per(converge_writes as f64),
        writes_by_request: most_first(by_request, |count| {
            #[allow(clippy::cast_precision_loss)]
            per(count as f64)
        }),
        server_cpu_per_thousand: per(server_cpu_seconds) * 1000.0,
        apiserver,
        object_sizes,
    })
}

/// A control plane with the benchmark's readiness writer, and the controller running
/// with its metrics answering.
async fn start(
    bin_dir: &Path,
    scale: &ScaleOptions,
) -> anyhow::Result<(Bench, tokio::task::JoinHandle<()>, Process)> {
    let options = if scale.audit_reads {
        Options::default().with_full_audit()
    } else {
        Options::default().with_audit()
    };
    let bench = Bench::start(options).await?;
    let readiness = tokio::spawn(fake_readiness(bench.client.clone()));
    let controller = bench.spawn_controller(bin_dir)?;
    wait_until(Duration::from_secs(60), "controller metrics", || async {
        bench.metric("database_controller_leader").await.is_some()
    })
    .await?;
    Ok((bench, readiness, controller))
}

/// With a profile asked for, the API server's profile window during the converge.
async fn profile(
    bench: &Bench,
    databases: usize,
    scale: &ScaleOptions,
) -> Option<anyhow::Result<apiserver_profile::Window>> {
    let seconds = scale.profile_seconds.filter(|_| databases > 0)?;
    tokio::time::sleep(PROFILE_DELAY).await;
    let out = apiserver_profile::profile_path(databases);
    Some(apiserver_profile::record(&bench.plane, seconds, &out).await)
}

/// Creates `databases` Databases and waits until all run; the controller's peak
/// resident memory meanwhile.
async fn converge(bench: &Bench, pid: u32, databases: usize) -> anyhow::Result<f64> {
    let mut peak = rss_mib(pid).unwrap_or(0.0);
    if databases == 0 {
        return Ok(peak);
    }
    let watches = Watches::start(&bench.client);
    let creating = measure(
        bench,
        &watches,
        "scale",
        databases,
        64,
        Duration::from_secs(1800),
    );
    let mut creating = std::pin::pin!(creating);
    loop {
        tokio::select! {
            result = &mut creating => { result?; return Ok(peak); }
            () = tokio::time::sleep(Duration::from_millis(200)) => peak = peak.max(rss_mib(pid).unwrap_or(0.0)),
        }
    }
}

/// CPU seconds the API server and etcd have used so far.
fn server_cpu(bench: &Bench) -> f64 {
    ["kube-apiserver", "etcd"]
        .iter()
        .flat_map(|name| bench.plane.pids_of(name))
        .filter_map(cpu_seconds)
        .sum()
}

/// `counts` as (request, figure) pairs, the largest figure first, zeros left out.
fn most_first(
    counts: std::collections::BTreeMap<String, usize>,
    figure: impl Fn(usize) -> f64,
) -> Vec<(String, f64)> {
    let mut pairs: Vec<(String, f64)> = counts
        .into_iter()
        .filter(|(_, count)| *count > 0)
        .map(|(request, count)| (request, figure(count)))
        .collect();
    pairs.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    pairs
}

/// The counts in `now` less those in `before`.
fn since(
    mut now: std::collections::BTreeMap<String, usize>,
    before: std::collections::BTreeMap<String, usize>,
) -> std::collections::BTreeMap<String, usize> {
    for (request, count) in before {
        if let Some(total) = now.get_mut(&request) {
            *total = total.saturating_sub(count);
        }
    }
    now
}
