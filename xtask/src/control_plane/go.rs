//! Running `go` for the control-plane build: its output goes to a log file, and the
//! terminal gets one line per step and a line with the elapsed time every 30 s.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

/// Where every `go` command of the build writes its output.
pub fn log_path() -> PathBuf {
    testenv::assets::cache_dir().join("build.log")
}

fn command(work: &Path) -> Command {
    let mut command = Command::new("go");
    command
        .current_dir(work)
        // Fail fast rather than download another toolchain; static binaries need no C.
        .env("GOTOOLCHAIN", "local")
        .env("CGO_ENABLED", "0")
        .env("GOFLAGS", "-mod=mod");
    command
}

/// Runs `go args...` in `work`, appending its output to the build log, and printing the
/// elapsed time every 30 s so a long build does not look stuck.
pub fn run(work: &Path, args: &[&str]) -> anyhow::Result<()> {
    let log = log_path();
    let out = File::options()
        .create(true)
        .append(true)
        .open(&log)
        .with_context(|| format!("opening {}", log.display()))?;
    let err = out.try_clone()?;
    let mut child = command(work)
        .args(args)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .with_context(|| format!("running go {}", args.join(" ")))?;
    let started = Instant::now();
    let (done, finished) = mpsc::channel::<()>();
    let ticker = std::thread::spawn(move || {
        while finished.recv_timeout(Duration::from_secs(30)).is_err() {
            println!("    ... {} elapsed", minutes(started.elapsed()));
        }
    });
    let status = child.wait();
    let _ = done.send(());
    let _ = ticker.join();
    let status = status?;
    if !status.success() {
        bail!(
            "go {} failed with {status}; the last lines of {}:\n{}",
            args.first().copied().unwrap_or_default(),
            log.display(),
            tail(&log, 30)
        );
    }
    Ok(())
}

/// Runs `go args...` and parses its standard output as JSON.
pub fn json(work: &Path, args: &[&str]) -> anyhow::Result<serde_json::Value> {
    let output = command(work)
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

/// `go version`, or an error saying Go is needed.
pub fn version() -> anyhow::Result<String> {
    let output = Command::new("go")
        .arg("version")
        .output()
        .context("running go version")?;
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

/// `1m05s` for a duration.
pub fn minutes(elapsed: Duration) -> String {
    let secs = elapsed.as_secs();
    format!("{}m{:02}s", secs / 60, secs % 60)
}

fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minutes_are_zero_padded_seconds() {
        assert_eq!(minutes(Duration::from_secs(65)), "1m05s");
        assert_eq!(minutes(Duration::from_secs(600)), "10m00s");
    }
}
