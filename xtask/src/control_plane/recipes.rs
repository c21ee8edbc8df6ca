//! How each control-plane component is built from its Go module.
//!
//! Kubernetes is not meant to be consumed as a Go module: its go.mod requires every
//! staging module (`k8s.io/api`, ...) at `v0.0.0` and points them at `./staging`. A small
//! wrapper module requires `k8s.io/kubernetes` and replaces each staging module with its
//! published `v0.X.Y`, read from the release's own go.mod so the list is always complete.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use testenv::assets::{self, COREDNS_VERSION, KUBERNETES_VERSION, KWOK_VERSION};

use super::go;

/// kwok stages: node setup and heartbeat, Pod readiness and deletion (testenv provisions
/// volumes itself).
const KWOK_STAGES: [&str; 5] = [
    "node/fast/node-initialize.yaml",
    "node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
    "pod/fast/pod-ready.yaml",
    "pod/fast/pod-complete.yaml",
    "pod/fast/pod-delete.yaml",
];

/// Every Kubernetes command the wrapper module holds, so one `go mod tidy` serves the
/// control plane and the node alike.
const KUBERNETES_COMMANDS: [&str; 6] = [
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubectl",
    "kubelet",
    "kube-proxy",
];

/// The CoreDNS plugins the real tier's Corefile uses. A main package of its own
/// imports only these, instead of CoreDNS's default set with every cloud provider's SDK.
const COREDNS_PLUGINS: [&str; 6] = ["bind", "errors", "cache", "kubernetes", "forward", "health"];

/// Builds `commands` (names under `k8s.io/kubernetes/cmd/`) into `bin`.
pub fn kubernetes(work: &Path, bin: &Path, commands: &[&str]) -> anyhow::Result<()> {
    std::fs::create_dir_all(work)?;
    let module = format!("k8s.io/kubernetes@{KUBERNETES_VERSION}");
    let info = go::json(work, &["mod", "download", "-json", &module])?;
    let gomod_path = info["GoMod"]
        .as_str()
        .context("go mod download gave no GoMod")?;
    let upstream = std::fs::read_to_string(gomod_path)?;
    let staging = staging_modules(&upstream);
    if staging.is_empty() {
        bail!("no staging modules found in {gomod_path}");
    }
    std::fs::write(work.join("go.mod"), wrapper_go_mod(&staging))?;
    let mut tools = String::from("//go:build tools\n\npackage tools\n\nimport (\n");
    for command in KUBERNETES_COMMANDS {
        let _ = writeln!(tools, "\t_ \"k8s.io/kubernetes/cmd/{command}\"");
    }
    tools.push_str(")\n");
    std::fs::write(work.join("tools.go"), tools)?;
    go::run(work, &["mod", "tidy"])?;
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
    let ldflags = ldflags.join(" ");
    let out_dir = format!("{}/", bin.display());
    let packages: Vec<String> = commands
        .iter()
        .map(|c| format!("k8s.io/kubernetes/cmd/{c}"))
        .collect();
    let mut args = vec![
        "build",
        "-trimpath",
        "-tags",
        "selinux,notest",
        "-ldflags",
        &ldflags,
        "-o",
        &out_dir,
    ];
    args.extend(packages.iter().map(String::as_str));
    go::run(work, &args)
}

/// Builds `package@version` through a wrapper module that holds it as a tool: `go
/// install pkg@version` refuses modules whose go.mod has replace directives, as etcd's does.
pub fn tool(work: &Path, package: &str, version: &str, output: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(work)?;
    std::fs::write(
        work.join("go.mod"),
        format!("module local.invalid/{}\n\ngo 1.26.0\n", file_name(work)),
    )?;
    go::run(work, &["get", "-tool", &format!("{package}@{version}")])?;
    go::run(
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

/// Builds CoreDNS with only [`COREDNS_PLUGINS`] compiled in.
pub fn coredns(work: &Path, output: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(work)?;
    std::fs::write(
        work.join("go.mod"),
        format!(
            "module local.invalid/coredns\n\ngo 1.26.0\n\nrequire github.com/coredns/coredns {COREDNS_VERSION}\n"
        ),
    )?;
    std::fs::write(work.join("main.go"), coredns_main())?;
    go::run(work, &["mod", "tidy"])?;
    go::run(
        work,
        &[
            "build",
            "-trimpath",
            "-ldflags",
            "-s -w",
            "-o",
            &output.display().to_string(),
            ".",
        ],
    )
}

fn coredns_main() -> String {
    let mut imports = String::new();
    for plugin in COREDNS_PLUGINS {
        let _ = writeln!(
            imports,
            "\t_ \"github.com/coredns/coredns/plugin/{plugin}\""
        );
    }
    format!(
        "// CoreDNS with the plugins the test cluster's Corefile uses.\npackage main\n\n\
         import (\n\t\"github.com/coredns/coredns/coremain\"\n\t_ \"github.com/coredns/coredns/core/dnsserver\"\n{imports})\n\n\
         func main() {{\n\tcoremain.Run()\n}}\n"
    )
}

/// Concatenates kwok's stage files from its module into one config file.
pub fn kwok_stages(kwok_work: &Path, bin: &Path) -> anyhow::Result<()> {
    let info = go::json(
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

    #[test]
    fn coredns_main_imports_each_plugin_it_needs() {
        let main = coredns_main();
        for plugin in COREDNS_PLUGINS {
            assert!(
                main.contains(&format!("\"github.com/coredns/coredns/plugin/{plugin}\"")),
                "{main}"
            );
        }
        assert!(main.contains("coremain.Run()"), "{main}");
    }
}
