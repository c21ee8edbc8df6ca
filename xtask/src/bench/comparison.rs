//! The comparison operator (`xtask/comparison`): a Database operator written the way the
//! kubebuilder tutorials write one, with controller-runtime. `--comparison` builds it
//! with Go and measures it in the controller's place, so the ratio the throughput
//! targets speak of can be measured on one machine. It is no part of the product's
//! build or tests.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, bail};

/// Builds the comparison operator as `controller` in a folder of its own, beside a link
/// to the webhook from `bin_dir` (the latency part installs the webhook); returns the
/// folder.
pub fn build(bin_dir: &Path) -> anyhow::Result<PathBuf> {
    let source = crate::workspace_root().join("xtask").join("comparison");
    let out = crate::workspace_root().join("target").join("comparison");
    std::fs::create_dir_all(&out)?;
    println!("bench: building the comparison operator (controller-runtime) with Go");
    let status = Command::new("go")
        .current_dir(&source)
        .args(["build", "-trimpath", "-o"])
        .arg(out.join("controller"))
        .arg(".")
        .status()
        .context("running go build (Go is needed for --comparison)")?;
    if !status.success() {
        bail!("building the comparison operator failed");
    }
    let webhook = out.join("webhook");
    if webhook.exists() || webhook.is_symlink() {
        std::fs::remove_file(&webhook)?;
    }
    std::os::unix::fs::symlink(bin_dir.join("webhook"), &webhook)?;
    Ok(out)
}
