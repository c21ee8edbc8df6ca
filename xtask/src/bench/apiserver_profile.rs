//! Where the API server's CPU goes while Databases converge: a CPU profile of
//! kube-apiserver (its `/debug/pprof/profile`) split by request kind with `go tool
//! pprof`, and each kind's CPU per request from the audit log's counts over the same
//! window. A Database status apply and a plain create cost very different amounts, and
//! the writes-per-Database figure alone cannot show it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, bail};
use serde_json::{Value, json};
use testenv::ControlPlane;

use super::cluster::request_of;

/// One kind of work: which stacks count as it, and which audited requests it serves.
struct Kind {
    label: &'static str,
    focus: &'static str,
    ignore: Option<&'static str>,
    /// Whether an audited `<verb> <resource>` request is of this kind; `None` for work
    /// no single request owns (watches, garbage collection).
    requests: Option<fn(&str) -> bool>,
}

const KINDS: &[Kind] = &[
    Kind {
        label: "Database status writes",
        focus: r"customresource\.\(\*StatusREST\)\.Update|crdHandler\)\.serveStatus",
        ignore: None,
        requests: Some(|r| r == "patch databases/status" || r == "update databases/status"),
    },
    Kind {
        label: "other patches and updates (finalizers, owned objects)",
        focus: r"PatchResource|handlers\.\(\*patcher\)|UpdateResource",
        ignore: Some(r"StatusREST|serveStatus"),
        requests: Some(|r| {
            (r.starts_with("patch ") || r.starts_with("update ")) && !r.ends_with("/status")
        }),
    },
    Kind {
        label: "creates (every kind, the benchmark's Databases too)",
        focus: r"CreateResource",
        ignore: None,
        requests: Some(|r| r.starts_with("create ")),
    },
    Kind {
        label: "StatefulSet status writes (the benchmark's readiness)",
        focus: r"statefulset/storage\.\(\*StatusREST\)\.Update",
        ignore: None,
        requests: Some(|r| r == "patch statefulsets/status"),
    },
    Kind {
        label: "gets and lists",
        focus: r"GetResource|ListResource",
        ignore: Some(r"handleWatch|serveWatch"),
        requests: None,
    },
    Kind {
        label: "watches (sending events)",
        focus: r"handleWatch|serveWatch|cacher\.\(\*cacheWatcher\)|cacher\.\(\*Cacher\)\.dispatch",
        ignore: None,
        requests: None,
    },
    Kind {
        label: "watch cache intake (each write decoded again from etcd's watch)",
        focus: r"etcd3\.\(\*watchChan\)",
        ignore: None,
        requests: None,
    },
    Kind {
        label: "authentication (client certificates, checked on every request)",
        focus: r"AuthenticateRequest",
        ignore: None,
        requests: None,
    },
    Kind {
        label: "Go garbage collection (background)",
        focus: r"runtime\.gcBgMarkWorker",
        ignore: None,
        requests: None,
    },
];

/// The API server's CPU over one profile window, by kind.
pub struct Breakdown {
    pub window_seconds: u64,
    pub total_seconds: f64,
    /// Label, CPU seconds, requests in the window (where a request owns the work).
    pub kinds: Vec<(&'static str, f64, Option<usize>)>,
}

impl Breakdown {
    pub fn print(&self, databases: usize) {
        println!(
            "\n| API server CPU by kind at {databases} (profile of {} s while converging) | CPU s | share | requests | CPU ms per request |",
            self.window_seconds
        );
        println!("| --- | --- | --- | --- | --- |");
        let mut accounted = 0.0;
        for (label, seconds, requests) in &self.kinds {
            accounted += seconds;
            let (count, per) = match requests {
                Some(n) if *n > 0 => {
                    #[allow(clippy::cast_precision_loss)]
                    let per = seconds * 1000.0 / *n as f64;
                    (n.to_string(), format!("{per:.2}"))
                }
                Some(_) => ("0".to_owned(), String::new()),
                None => (String::new(), String::new()),
            };
            println!(
                "| {label} | {seconds:.2} | {:.0} % | {count} | {per} |",
                self.share(*seconds)
            );
        }
        let rest = (self.total_seconds - accounted).max(0.0);
        println!(
            "| everything else (request filters: flow control, authorization, audit; network writes) | {rest:.2} | {:.0} % | | |",
            self.share(rest)
        );
        println!("| total | {:.2} | 100 % | | |", self.total_seconds);
    }

    fn share(&self, seconds: f64) -> f64 {
        if self.total_seconds > 0.0 {
            seconds * 100.0 / self.total_seconds
        } else {
            0.0
        }
    }

    pub fn to_json(&self) -> Value {
        json!({
            "window_seconds": self.window_seconds,
            "total_cpu_seconds": self.total_seconds,
            "kinds": self.kinds.iter().map(|(label, seconds, requests)| json!({
                "kind": label, "cpu_seconds": seconds, "requests": requests,
            })).collect::<Vec<_>>(),
        })
    }
}

/// A recorded profile window: the raw profile on disk and the audited requests before
/// and after it.
pub struct Window {
    seconds: u64,
    profile: PathBuf,
    before: BTreeMap<String, usize>,
    after: BTreeMap<String, usize>,
}

/// Profiles the API server for `seconds` and keeps the profile at `out`, for
/// [`Window::split`] and for anyone's `go tool pprof`.
pub async fn record(plane: &ControlPlane, seconds: u64, out: &Path) -> anyhow::Result<Window> {
    let before = requests_by_kind(plane);
    let output = tokio::process::Command::from(plane.kubectl()?)
        .args([
            "get",
            "--raw",
            &format!("/debug/pprof/profile?seconds={seconds}"),
        ])
        .output()
        .await
        .context("running kubectl for the API server's CPU profile")?;
    if !output.status.success() {
        bail!(
            "the API server's CPU profile failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    let after = requests_by_kind(plane);
    if let Some(dir) = out.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    std::fs::write(out, &output.stdout)
        .with_context(|| format!("writing the profile to {}", out.display()))?;
    Ok(Window {
        seconds,
        profile: out.to_owned(),
        before,
        after,
    })
}

impl Window {
    /// The window's CPU by kind, with each kind's requests in it.
    pub fn split(&self) -> anyhow::Result<Breakdown> {
        let total_seconds = focused_seconds(&self.profile, None, None)?;
        let mut kinds = Vec::new();
        for kind in KINDS {
            let seconds = focused_seconds(&self.profile, Some(kind.focus), kind.ignore)?;
            let requests = kind.requests.map(|matches| {
                self.after
                    .iter()
                    .filter(|(request, _)| matches(request))
                    .map(|(request, count)| {
                        count.saturating_sub(self.before.get(request).copied().unwrap_or(0))
                    })
                    .sum()
            });
            kinds.push((kind.label, seconds, requests));
        }
        Ok(Breakdown {
            window_seconds: self.seconds,
            total_seconds,
            kinds,
        })
    }
}

/// Where [`record`] keeps the profile of a run at `databases`.
pub fn profile_path(databases: usize) -> PathBuf {
    super::output_dir().join(format!("apiserver-{databases}.pprof"))
}

/// Every audited request so far (every user) by `<verb> <resource>[/<subresource>]`.
fn requests_by_kind(plane: &ControlPlane) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for event in plane.audit_events() {
        if event["stage"] == "ResponseComplete" {
            *counts.entry(request_of(&event)).or_insert(0) += 1;
        }
    }
    counts
}

/// CPU seconds of the samples whose stacks match `focus` and not `ignore` (every
/// sample without a focus), as `go tool pprof -top` totals them with no node dropped.
fn focused_seconds(
    profile: &Path,
    focus: Option<&str>,
    ignore: Option<&str>,
) -> anyhow::Result<f64> {
    let mut command = Command::new("go");
    command.args([
        "tool",
        "pprof",
        "-top",
        "-nodefraction=0",
        "-edgefraction=0",
        "-nodecount=1000000",
    ]);
    if let Some(focus) = focus {
        command.arg(format!("-focus={focus}"));
    }
    if let Some(ignore) = ignore {
        command.arg(format!("-ignore={ignore}"));
    }
    let output = command
        .arg(profile)
        .output()
        .context("running go tool pprof")?;
    if !output.status.success() {
        bail!(
            "go tool pprof failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(accounted_for(&String::from_utf8_lossy(&output.stdout)))
}

/// The seconds in a `pprof -top` listing's "Showing nodes accounting for" line: with
/// no node dropped, every matching sample; 0 when no sample matched.
fn accounted_for(listing: &str) -> f64 {
    listing
        .lines()
        .find_map(|line| line.trim().strip_prefix("Showing nodes accounting for "))
        .and_then(|rest| rest.split(',').next())
        .and_then(seconds_of)
        .unwrap_or(0.0)
}

/// `"1.25s"`, `"850ms"`, `"40us"` as seconds.
fn seconds_of(figure: &str) -> Option<f64> {
    let (number, scale) = if let Some(n) = figure.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = figure.strip_suffix("us") {
        (n, 1e-6)
    } else if let Some(n) = figure.strip_suffix("ns") {
        (n, 1e-9)
    } else if let Some(n) = figure.strip_suffix("min") {
        (n, 60.0)
    } else {
        (figure.strip_suffix('s')?, 1.0)
    };
    number.parse::<f64>().ok().map(|n| n * scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LISTING: &str = "File: kube-apiserver
Type: cpu
Duration: 30.02s, Total samples = 43.90s (146.21%)
Active filters:
   focus=customresource
Showing nodes accounting for 7.10s, 16.17% of 43.90s total
      flat  flat%   sum%        cum   cum%
     3.42s  7.79%  7.79%      3.42s  7.79%  runtime.spanClass.sizeclass (inline)
";

    #[test]
    fn the_matching_samples_are_the_ones_the_listing_accounts_for() {
        assert!((accounted_for(LISTING) - 7.10).abs() < 1e-9);
    }

    #[test]
    fn a_listing_without_samples_counts_nothing() {
        assert!(accounted_for("File: kube-apiserver\n").abs() < f64::EPSILON);
    }

    #[test]
    fn pprof_units_become_seconds() {
        assert_eq!(seconds_of("850ms"), Some(0.85));
        assert_eq!(seconds_of("2.5s"), Some(2.5));
        assert_eq!(seconds_of("1.5min"), Some(90.0));
        assert_eq!(seconds_of("40us").map(|s| (s * 1e6).round()), Some(40.0));
        assert_eq!(seconds_of("27.47%"), None);
    }
}
