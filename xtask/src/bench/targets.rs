//! The targets the benchmark is judged by, each with what was measured and whether it
//! was met. A miss is reported, never hidden: the benchmark itself does not fail on one.

use std::time::Duration;

use serde_json::{Value, json};

use super::failover::Failover;
use super::latency::Latency;
use super::scale::Scale;
use super::webhook::{Route, WebhookFigures};

pub struct Target {
    pub name: String,
    pub measured: String,
    pub met: bool,
}

impl Target {
    pub fn to_json(&self) -> Value {
        json!({"target": self.name, "measured": self.measured, "met": self.met})
    }
}

/// Every target whose figure this run measured.
pub fn evaluate(
    latency: Option<&(Latency, Latency, Duration)>,
    scales: &[Scale],
    webhook: Option<&WebhookFigures>,
    failovers: &[Failover],
) -> Vec<Target> {
    let mut targets = failover_targets(failovers);
    targets.extend(scale_targets(scales));
    targets.extend(webhook_target(webhook));
    targets.extend(latency.map(latency_targets).into_iter().flatten());
    targets
}

/// Per failover run: writes unavailable within the bound, and in Sync mode no loss.
fn failover_targets(failovers: &[Failover]) -> Vec<Target> {
    let mut targets = Vec::new();
    for f in failovers {
        // The bound, then about a readiness period for the promotion and the Service.
        let allowed = f.bound.as_secs_f64() + 15.0;
        targets.push(Target {
            name: format!(
                "{} {} failover: writes unavailable for at most the bound + 15 s ({allowed:.0} s) at p95",
                f.engine, f.mode
            ),
            measured: format!(
                "p95 {:.1} s, max {:.1} s",
                f.unavailable.p95 / 1000.0,
                f.unavailable.max / 1000.0
            ),
            met: f.unavailable.p95 / 1000.0 <= allowed,
        });
        if f.mode == "Sync" {
            targets.push(Target {
                name: format!("{} Sync failover: no acknowledged write lost", f.engine),
                measured: format!("{} of {} lost", f.lost, f.acknowledged),
                met: f.lost == 0,
            });
        }
    }
    targets
}

/// The controller's memory at 10,000 Databases and its steady-state writes.
fn scale_targets(scales: &[Scale]) -> Vec<Target> {
    let mut targets = Vec::new();
    let at = |count: usize| scales.iter().find(|s| s.databases == count);
    if let Some(scale) = at(10_000) {
        targets.push(Target {
            name: "controller memory under 64 MiB with 10,000 Databases".to_owned(),
            measured: format!(
                "{:.1} MiB peak, {:.1} MiB idle",
                scale.rss_peak_mib, scale.rss_idle_mib
            ),
            met: scale.rss_peak_mib < 64.0,
        });
    }
    // The target names 1,000 Ready Databases; a smaller run reports its largest scale.
    let steady = at(1_000).or_else(|| {
        scales
            .iter()
            .filter(|s| s.databases > 0)
            .max_by_key(|s| s.databases)
    });
    if let Some(scale) = steady {
        targets.push(Target {
            name: format!(
                "0 steady-state writes with {} Ready Databases",
                scale.databases
            ),
            measured: format!(
                "{:.1} writes/min over {:.0} s",
                scale.steady_writes_per_minute, scale.idle_window_seconds
            ),
            met: scale.steady_writes_per_minute == 0.0,
        });
    }
    targets
}

/// The webhook's direct p99 at concurrency 16, when that load ran.
fn webhook_target(webhook: Option<&WebhookFigures>) -> Option<Target> {
    let load = webhook
        .iter()
        .flat_map(|w| &w.loads)
        .find(|l| l.route == Route::Direct && l.concurrency == 16)?;
    Some(Target {
        name: "webhook p99 under 2 ms at concurrency 16, direct".to_owned(),
        measured: format!("{:.2} ms", load.latency.p99),
        met: load.latency.p99 < 2.0,
    })
}

/// The burst all Running within 60 s, and create to StatefulSet against the API server.
fn latency_targets((single, burst, _): &(Latency, Latency, Duration)) -> Vec<Target> {
    vec![
        Target {
            name: format!("{} Databases all Running within 60 s", burst.count),
            measured: format!(
                "last Running {:.1} s after its create, all in {:.1} s",
                burst.to_running.max / 1000.0,
                burst.wall_seconds
            ),
            met: burst.wall_seconds < 60.0,
        },
        Target {
            name: "create to StatefulSet p50 within twice the API server's create latency"
                .to_owned(),
            measured: format!(
                "{:.1} ms vs 2 x {:.1} ms",
                single.to_statefulset.p50, single.create_call.p50
            ),
            met: single.to_statefulset.p50 <= 2.0 * single.create_call.p50,
        },
    ]
}
