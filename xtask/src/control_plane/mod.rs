//! `cargo xtask control-plane build`: etcd, kube-apiserver, kube-controller-manager,
//! kube-scheduler, kubectl and kwok (and, for the real tier, kubelet, kube-proxy and
//! CoreDNS) built with `go` from pinned module versions, cached per user and keyed by
//! version so a second run builds nothing.

mod go;
mod recipes;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::Context;
use testenv::assets::{
    self, COREDNS_VERSION, ETCD_VERSION, KUBERNETES_VERSION, KWOK_VERSION, VERSITYGW_VERSION,
};

/// Which tier's binaries to make sure of.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Tier {
    /// API server, controller-manager, scheduler and kwok.
    Full,
    /// The full tier plus a real node: kubelet, kube-proxy and CoreDNS.
    Real,
}

/// One build step: its name (and completion marker), what it makes, and how long it
/// takes cold on 2 cores, for the progress line.
struct Step {
    name: String,
    what: &'static str,
    expected: Duration,
}

/// Returns the folder holding every binary `tier` needs, building what is missing.
pub fn ensure_built(tier: Tier) -> anyhow::Result<PathBuf> {
    if let Some(dir) = complete_assets_dir(tier) {
        return Ok(dir);
    }
    let bin = assets::cache_bin_dir();
    let src = assets::cache_dir().join("src");
    std::fs::create_dir_all(&bin)?;
    std::fs::create_dir_all(&src)?;
    go::version()
        .context("the control plane is built with Go; install go 1.26 or set KUBEBUILDER_ASSETS")?;

    let steps = steps(tier);
    let missing: Vec<&Step> = steps.iter().filter(|s| !s.marker(&bin).is_file()).collect();
    if missing.is_empty() {
        println!("control plane: every binary cached in {}", bin.display());
        return Ok(bin);
    }
    build_missing(&missing, steps.len(), &src, &bin)?;
    Ok(bin)
}

/// `KUBEBUILDER_ASSETS` when it is set and holds every binary `tier` needs; says which
/// it is when set.
fn complete_assets_dir(tier: Tier) -> Option<PathBuf> {
    let wanted: Vec<&str> = assets::CORE_BINARIES
        .iter()
        .chain(&assets::FULL_BINARIES)
        .chain(if tier == Tier::Real {
            &assets::REAL_BINARIES[..]
        } else {
            &[]
        })
        .copied()
        .collect();
    let dir = std::env::var_os("KUBEBUILDER_ASSETS").map(PathBuf::from)?;
    let all_there = wanted.iter().all(|b| dir.join(b).is_file())
        && dir.join(assets::KWOK_STAGES_FILE).is_file();
    if all_there {
        println!("control plane: using KUBEBUILDER_ASSETS={}", dir.display());
        return Some(dir);
    }
    println!(
        "control plane: KUBEBUILDER_ASSETS={} lacks some binaries; the cache fills the gaps",
        dir.display()
    );
    None
}

/// The build steps `tier` needs, in the order they run.
fn steps(tier: Tier) -> Vec<Step> {
    let mut steps = vec![
        Step::new(
            "kubernetes",
            "kube-apiserver, kube-controller-manager, kube-scheduler, kubectl",
            7,
        ),
        Step::new("etcd", "etcd", 1),
        Step::new("kwok", "kwok", 2),
        Step::new("kwok-stages", "kwok's stage files", 0),
    ];
    if tier == Tier::Real {
        steps.push(Step::new("kubernetes-node", "kubelet, kube-proxy", 1));
        steps.push(Step {
            name: format!("coredns-{COREDNS_VERSION}"),
            ..Step::new("", "CoreDNS", 2)
        });
        steps.push(Step {
            name: format!("versitygw-{VERSITYGW_VERSION}"),
            ..Step::new("", "versitygw (the tests' object store)", 2)
        });
    }
    steps
}

/// Runs the `missing` steps (of `total`) one by one into `bin`, marking each done, with
/// a progress line before and after each.
fn build_missing(missing: &[&Step], total: usize, src: &Path, bin: &Path) -> anyhow::Result<()> {
    let expected: Duration = missing.iter().map(|s| s.expected).sum();
    println!(
        "control plane: building {} of {} components from Go modules, usually about {} on 2 cores (once; cached in {}); go's output goes to {}",
        missing.len(),
        total,
        go::minutes(expected),
        bin.display(),
        go::log_path().display()
    );
    let started = Instant::now();
    for (index, step) in missing.iter().enumerate() {
        println!(
            "control plane: [{}/{}] {} (usually about {}; {} elapsed in all)",
            index + 1,
            missing.len(),
            step.what,
            go::minutes(step.expected),
            go::minutes(started.elapsed())
        );
        let step_started = Instant::now();
        build(&step.name, src, bin).with_context(|| format!("building {}", step.what))?;
        std::fs::write(step.marker(bin), format!("{}\n", go::version()?))?;
        println!(
            "control plane: [{}/{}] {} built in {}",
            index + 1,
            missing.len(),
            step.what,
            go::minutes(step_started.elapsed())
        );
    }
    println!("control plane: built in {}", go::minutes(started.elapsed()));
    Ok(())
}

impl Step {
    fn new(name: &str, what: &'static str, minutes: u64) -> Self {
        Self {
            name: name.to_owned(),
            what,
            expected: Duration::from_secs(minutes * 60),
        }
    }

    fn marker(&self, bin: &Path) -> PathBuf {
        bin.join(format!(".{}.done", self.name))
    }
}

fn build(name: &str, src: &Path, bin: &Path) -> anyhow::Result<()> {
    let kubernetes = src.join("kubernetes");
    match name {
        "kubernetes" => recipes::kubernetes(
            &kubernetes,
            bin,
            &[
                "kube-apiserver",
                "kube-controller-manager",
                "kube-scheduler",
                "kubectl",
            ],
        ),
        "kubernetes-node" => recipes::kubernetes(&kubernetes, bin, &["kubelet", "kube-proxy"]),
        // etcd's server module has a main package at its root; `-o` names the binary.
        "etcd" => recipes::tool(
            &src.join("etcd"),
            "go.etcd.io/etcd/server/v3",
            ETCD_VERSION,
            &bin.join("etcd"),
        ),
        "kwok" => recipes::tool(
            &src.join("kwok"),
            "sigs.k8s.io/kwok/cmd/kwok",
            KWOK_VERSION,
            &bin.join("kwok"),
        ),
        "kwok-stages" => recipes::kwok_stages(&src.join("kwok"), bin),
        versitygw if versitygw.starts_with("versitygw") => recipes::tool(
            &src.join("versitygw"),
            "github.com/versity/versitygw/cmd/versitygw",
            VERSITYGW_VERSION,
            &bin.join("versitygw"),
        ),
        _ => recipes::coredns(&src.join("coredns"), &bin.join("coredns")),
    }
}

/// `cargo xtask control-plane info`.
pub fn print_info() {
    println!("pinned: kubernetes {KUBERNETES_VERSION}, etcd {ETCD_VERSION}, kwok {KWOK_VERSION}");
    println!("pinned for the real tier: coredns {COREDNS_VERSION}, versitygw {VERSITYGW_VERSION}");
    for name in assets::CORE_BINARIES
        .iter()
        .chain(&assets::FULL_BINARIES)
        .chain(&assets::REAL_BINARIES)
    {
        match assets::find(name) {
            Ok(path) => println!("{name:<24} {} ({})", path.display(), binary_version(&path)),
            Err(_) => println!("{name:<24} missing"),
        }
    }
}

/// The first line a binary prints for `--version`.
fn binary_version(path: &Path) -> String {
    let mut command = Command::new(path);
    if path.file_name().is_some_and(|n| n == "kubectl") {
        command.args(["version", "--client"]);
    } else {
        command.arg("--version");
    }
    command.output().ok().map_or_else(
        || "version unknown".to_owned(),
        |o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .unwrap_or_default()
                .trim()
                .to_owned()
        },
    )
}
