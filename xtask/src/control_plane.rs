//! `cargo xtask control-plane build`: etcd, kube-apiserver, kube-controller-manager,
//! kube-scheduler, kubectl and kwok built with `go` from pinned module versions, cached
//! per user and keyed by version so a second run builds nothing.
//!
//! Kubernetes is not meant to be consumed as a Go module: its go.mod requires every
//! staging module (`k8s.io/api`, ...) at `v0.0.0` and points them at `./staging`. A small
//! wrapper module requires `k8s.io/kubernetes` and replaces each staging module with its
//! published `v0.X.Y`, read from the release's own go.mod so the list is always complete.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, bail};
use testenv::assets::{self, ETCD_VERSION, KUBERNETES_VERSION, KWOK_VERSION};

/// kwok stages: node setup and heartbeat, Pod readiness and deletion (testenv provisions
/// volumes itself).
const KWOK_STAGES: [&str; 5] = [
    "node/fast/node-initialize.yaml",
    "node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
    "pod/fast/pod-ready.yaml",
    "pod/fast/pod-complete.yaml",
    "pod/fast/pod-delete.yaml",
];

/// Returns the folder holding every binary, building what is missing.
pub fn ensure_built() -> anyhow::Result<PathBuf> {
    if let Some(dir) = std::env::var_os("KUBEBUILDER_ASSETS").map(PathBuf::from) {
        let all_there = assets::CORE_BINARIES
            .iter()
            .chain(&assets::FULL_BINARIES)
            .all(|b| dir.join(b).is_file())
            && dir.join(assets::KWOK_STAGES_FILE).is_file();
        if all_there {
            println!("control plane: using KUBEBUILDER_ASSETS={}", dir.display());
            return Ok(dir);
        }
        println!(
            "control plane: KUBEBUILDER_ASSETS={} lacks some binaries; the cache fills the gaps",
            dir.display()
        );
    }
    let bin = assets::cache_bin_dir();
    let src = assets::cache_dir().join("src");
    std::fs::create_dir_all(&bin)?;
    std::fs::create_dir_all(&src)?;
    go_version()
        .context("the control plane is built with Go; install go 1.26 or set KUBEBUILDER_ASSETS")?;

    // A cold build of the Kubernetes binaries takes about 10 minutes on 2 cores.
    step(&bin, "kubernetes", || {
        build_kubernetes(&src.join("kubernetes"), &bin)
    })?;
    // etcd's server module has a main package at its root; `-o` names the binary.
    step(&bin, "etcd", || {
        build_tool(
            &src.join("etcd"),
            "go.etcd.io/etcd/server/v3",
            ETCD_VERSION,
            &bin.join("etcd"),
        )
    })?;
    step(&bin, "kwok", || {
        build_tool(
            &src.join("kwok"),
            "sigs.k8s.io/kwok/cmd/kwok",
            KWOK_VERSION,
            &bin.join("kwok"),
        )
    })?;
    step(&bin, "kwok-stages", || {
        write_kwok_stages(&src.join("kwok"), &bin)
    })?;
    Ok(bin)
}

/// Runs one build step unless its completion marker is there, and times it.
fn step(bin: &Path, name: &str, build: impl FnOnce() -> anyhow::Result<()>) -> anyhow::Result<()> {
    let marker = bin.join(format!(".{name}.done"));
    if marker.is_file() {
        println!("control plane: {name} cached in {}", bin.display());
        return Ok(());
    }
    println!("control plane: building {name}");
    let started = Instant::now();
    build().with_context(|| format!("building {name}"))?;
    std::fs::write(&marker, format!("{}\n", go_version()?))?;
    println!("control plane: {name} built in {:.0?}", started.elapsed());
    Ok(())
}

fn build_kubernetes(work: &Path, bin: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(work)?;
    let module = format!("k8s.io/kubernetes@{KUBERNETES_VERSION}");
    let info = go_json(work, &["mod", "download", "-json", &module])?;
    let gomod_path = info["GoMod"]
        .as_str()
        .context("go mod download gave no GoMod")?;
    let upstream = std::fs::read_to_string(gomod_path)?;
    let staging = staging_modules(&upstream);
    if staging.is_empty() {
        bail!("no staging modules found in {gomod_path}");
    }
    std::fs::write(work.join("go.mod"), wrapper_go_mod(&staging))?;
    std::fs::write(
        work.join("tools.go"),
        "//go:build tools\n\npackage tools\n\nimport (\n\t_ \"k8s.io/kubernetes/cmd/kube-apiserver\"\n\t_ \"k8s.io/kubernetes/cmd/kube-controller-manager\"\n\t_ \"k8s.io/kubernetes/cmd/kube-scheduler\"\n\t_ \"k8s.io/kubernetes/cmd/kubectl\"\n)\n",
    )?;
    go(work, &["mod", "tidy"])?;
    let minor = KUBERNETES_VERSION.split('.').nth(1).unwrap_or("0");
    let mut ldflags = vec!["-s".to_owned(), "-w".to_owned()];
    for package in [
        "k8s.io/component-base/version",
        "k8s.io/client-go/pkg/version",
    ] {
        ldflags.push(format!("-X {package}.gitVersion={KUBERNETES_VERSION}"));
        ldflags.push(format!("-X {package}.gitMajor=1"));
        ldflags.push(format!("-X {package}.gitMinor={minor}"));
    }
    let out_dir = format!("{}/", bin.display());
    go(
        work,
        &[
            "build",
            "-trimpath",
            "-tags",
            "selinux,notest",
            "-ldflags",
            &ldflags.join(" "),
            "-o",
            &out_dir,
            "k8s.io/kubernetes/cmd/kube-apiserver",
            "k8s.io/kubernetes/cmd/kube-controller-manager",
            "k8s.io/kubernetes/cmd/kube-scheduler",
            "k8s.io/kubernetes/cmd/kubectl",
        ],
    )
}

/// Builds `package@version` through a wrapper module that holds it as a tool: `go
/// install pkg@version` refuses modules whose go.mod has replace directives, as etcd's does.
fn build_tool(work: &Path, package: &str, version: &str, output: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(work)?;
    std::fs::write(
        work.join("go.mod"),
        format!("module local.invalid/{}\n\ngo 1.26.0\n", file_name(work)),
    )?;
    go(work, &["get", "-tool", &format!("{package}@{version}")])?;
    go(
        work,
        &[
            "build",
            "-trimpath",
            "-ldflags",
            "-s -w",
            "-o",
            &output.display().to_string(),
            package,
        ],
    )
}

/// Concatenates kwok's stage files from its module into one config file.
fn write_kwok_stages(kwok_work: &Path, bin: &Path) -> anyhow::Result<()> {
    let info = go_json(
        kwok_work,
        &[
            "mod",
            "download",
            "-json",
            &format!("sigs.k8s.io/kwok@{KWOK_VERSION}"),
        ],
    )?;
    let dir = PathBuf::from(
        info["Dir"]
            .as_str()
            .context("go mod download gave no Dir")?,
    );
    let mut out = String::new();
    for stage in KWOK_STAGES {
        let path = dir.join("kustomize/stage").join(stage);
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        out.push_str("---\n");
        out.push_str(&text);
        if !text.ends_with('\n') {
            out.push('\n');
        }
    }
    std::fs::write(bin.join(assets::KWOK_STAGES_FILE), out)?;
    Ok(())
}

/// Every `k8s.io/<name> => ./staging/...` replace in Kubernetes' own go.mod.
fn staging_modules(go_mod: &str) -> Vec<String> {
    go_mod
        .lines()
        .filter(|line| line.contains("=> ./staging/"))
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

fn wrapper_go_mod(staging: &[String]) -> String {
    let staging_version = KUBERNETES_VERSION.replacen("v1.", "v0.", 1);
    let mut replaces = String::new();
    for module in staging {
        let _ = writeln!(replaces, "\t{module} => {module} {staging_version}");
    }
    format!(
        "module local.invalid/kubernetes-binaries\n\ngo 1.26.0\n\ngodebug default=go1.26\n\nrequire k8s.io/kubernetes {KUBERNETES_VERSION}\n\nreplace (\n{replaces})\n"
    )
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn go_command(work: &Path) -> Command {
    let mut command = Command::new("go");
    command
        .current_dir(work)
        // Fail fast rather than download another toolchain; static binaries need no C.
        .env("GOTOOLCHAIN", "local")
        .env("CGO_ENABLED", "0")
        .env("GOFLAGS", "-mod=mod");
    command
}

fn go(work: &Path, args: &[&str]) -> anyhow::Result<()> {
    let status = go_command(work)
        .args(args)
        .status()
        .with_context(|| format!("running go {}", args.join(" ")))?;
    if !status.success() {
        bail!(
            "go {} failed with {status}",
            args.first().copied().unwrap_or_default()
        );
    }
    Ok(())
}

fn go_json(work: &Path, args: &[&str]) -> anyhow::Result<serde_json::Value> {
    let output = go_command(work)
        .args(args)
        .output()
        .with_context(|| format!("running go {}", args.join(" ")))?;
    if !output.status.success() {
        bail!(
            "go {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(serde_json::from_slice(&output.stdout)?)
}

fn go_version() -> anyhow::Result<String> {
    let output = Command::new("go")
        .arg("version")
        .output()
        .context("running go version")?;
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

/// `cargo xtask control-plane info`.
pub fn print_info() {
    println!("pinned: kubernetes {KUBERNETES_VERSION}, etcd {ETCD_VERSION}, kwok {KWOK_VERSION}");
    for name in assets::CORE_BINARIES.iter().chain(&assets::FULL_BINARIES) {
        match assets::find(name) {
            Ok(path) => println!("{name:<24} {} ({})", path.display(), binary_version(&path)),
            Err(_) => println!("{name:<24} missing"),
        }
    }
}

/// The first line a binary prints for `--version`.
fn binary_version(path: &Path) -> String {
    let mut command = Command::new(path);
    if file_name(path) == "kubectl" {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn staging_modules_are_read_from_replace_lines() {
        let go_mod = "require k8s.io/api v0.0.0\nreplace (\n\tk8s.io/api => ./staging/src/k8s.io/api\n\tk8s.io/streaming => ./staging/src/k8s.io/streaming\n)\n";
        assert_eq!(staging_modules(go_mod), ["k8s.io/api", "k8s.io/streaming"]);
    }

    #[test]
    fn wrapper_replaces_each_staging_module_with_its_published_version() {
        let text = wrapper_go_mod(&["k8s.io/api".to_owned()]);
        assert!(text.contains(&format!("require k8s.io/kubernetes {KUBERNETES_VERSION}")));
        let staging = KUBERNETES_VERSION.replacen("v1.", "v0.", 1);
        assert!(
            text.contains(&format!("\tk8s.io/api => k8s.io/api {staging}\n")),
            "{text}"
        );
    }
}
