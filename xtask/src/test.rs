//! `cargo xtask test`: the control-plane binaries and the engine images (built once,
//! then cached), every unit test, every acceptance test against a real kube-apiserver,
//! and the real tier's tests against real database servers; then a check that no
//! component outlived its test.
//!
//! The tests run in two lanes at once. The real tier's targets (named `real_*`) take the
//! machine's one real node in turn and spend most of their time waiting on database
//! servers; every other target, then the benchmark's smoke run, goes alongside them.

use std::process::{Command, ExitStatus};
use std::time::Instant;

use anyhow::{Context as _, bail};

/// The prefix of the test targets that start a real node.
const REAL_TIER: &str = "real_";

#[derive(clap::Args)]
pub struct TestArgs {
    /// Longer fault runs: 1,000 operations under SIGKILLs, 20 leader failovers, and 20
    /// database failovers in each replication mode (about an hour more). Each can also
    /// be set alone through FAULT_OPERATIONS, FAILOVER_TRIALS and
    /// DATABASE_FAILOVER_TRIALS; FAULT_SEED repeats a chaos run.
    #[arg(long)]
    pub long: bool,
    /// Arguments passed on to `cargo test` after `--` (e.g. a test name filter).
    #[arg(trailing_var_arg = true)]
    pub cargo_test_args: Vec<String>,
}

pub fn run(args: &TestArgs) -> anyhow::Result<()> {
    let started = Instant::now();
    prerequisites()?;
    println!(
        "control plane and images ready in {:.1?}",
        started.elapsed()
    );

    // Components already running (e.g. `cargo xtask cluster up`) are not the tests' doing.
    let before = leftover_components();
    let tests = Instant::now();
    if !cargo(args, &["--no-run".to_owned()]).status()?.success() {
        bail!("building the tests failed");
    }
    let (real, other) = test_targets()?;
    let log = crate::workspace_root().join("target/xtask-test-other-lane.log");
    let other_lane = {
        let mut selection = vec!["--lib".to_owned(), "--bins".to_owned()];
        selection.extend(other.iter().flat_map(|t| ["--test".to_owned(), t.clone()]));
        let command = cargo(args, &selection);
        let log = log.clone();
        std::thread::spawn(move || other_lane(command, &log))
    };
    let real_status = if real.is_empty() {
        None
    } else {
        let selection: Vec<String> = real
            .iter()
            .flat_map(|t| ["--test".to_owned(), t.clone()])
            .collect();
        Some(cargo(args, &selection).status()?)
    };
    println!("real tier's tests finished in {:.1?}", tests.elapsed());
    let other_lane = other_lane
        .join()
        .map_err(|_| anyhow::anyhow!("the other lane's thread panicked"))?;
    println!("the other lane's output ({}):", log.display());
    println!("{}", std::fs::read_to_string(&log).unwrap_or_default());
    println!(
        "tests finished in {:.1?} ({:.1?} in all)",
        tests.elapsed(),
        started.elapsed()
    );

    let leftovers: Vec<String> = leftover_components()
        .into_iter()
        .filter(|p| !before.contains(p))
        .collect();
    if !leftovers.is_empty() {
        bail!("components left running after the tests: {leftovers:?}");
    }
    println!("no control-plane process left running");
    let host = leftover_host_state();
    if !host.is_empty() {
        bail!("the real tier left state on the host: {host:?}");
    }
    println!("no mount, bridge, iptables chain or Pod cgroup left on the host");
    if let Some(status) = real_status.filter(|s| !s.success()) {
        bail!("the real tier's tests failed with {status}");
    }
    other_lane
}

/// `cargo test` over the workspace with `extra` options, the arguments given after `--`
/// and, with `--long`, the longer fault runs.
fn cargo(args: &TestArgs, extra: &[String]) -> Command {
    let mut command = Command::new(env!("CARGO"));
    if args.long {
        for (var, value) in [
            ("FAULT_OPERATIONS", "1000"),
            ("FAILOVER_TRIALS", "20"),
            ("DATABASE_FAILOVER_TRIALS", "20"),
        ] {
            if std::env::var_os(var).is_none() {
                command.env(var, value);
            }
        }
    }
    command.current_dir(crate::workspace_root()).args([
        "test",
        "--workspace",
        "--locked",
        "--no-fail-fast",
    ]);
    // Options for cargo come before `--`, test filters after it.
    let (options, filters) = split_at_dashes(&args.cargo_test_args);
    command.args(options).args(extra);
    command.arg("--");
    command.args(filters);
    command
}

fn split_at_dashes(args: &[String]) -> (&[String], &[String]) {
    match args.iter().position(|a| a == "--") {
        Some(at) => (&args[..at], &args[at + 1..]),
        None if args.first().is_some_and(|a| a.starts_with('-')) => (args, &[]),
        None => (&[], args),
    }
}

/// Every target but the real tier's, then (if they passed) the benchmark's smoke run,
/// its output in `log`.
fn other_lane(mut command: Command, log: &std::path::Path) -> anyhow::Result<()> {
    let started = Instant::now();
    let file = std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
    let status: ExitStatus = command.stdout(file.try_clone()?).stderr(file).status()?;
    println!(
        "the other lane's tests finished in {:.1?}",
        started.elapsed()
    );
    if !status.success() {
        bail!(
            "cargo test failed with {status} (output in {})",
            log.display()
        );
    }
    // A small benchmark run, so that `cargo xtask bench` cannot rot.
    println!("bench smoke run");
    crate::bench::run(&crate::bench::BenchArgs::smoke())?;
    println!(
        "the other lane, with the bench smoke run, finished in {:.1?}",
        started.elapsed()
    );
    Ok(())
}

/// The workspace's integration-test targets: the real tier's, and the others.
fn test_targets() -> anyhow::Result<(Vec<String>, Vec<String>)> {
    let output = Command::new(env!("CARGO"))
        .current_dir(crate::workspace_root())
        .args(["metadata", "--format-version", "1", "--no-deps", "--locked"])
        .output()?;
    if !output.status.success() {
        bail!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout)?;
    let mut names: Vec<String> = metadata["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|package| package["targets"].as_array().into_iter().flatten())
        .filter(|target| {
            target["kind"]
                .as_array()
                .is_some_and(|k| k.iter().any(|k| k == "test"))
        })
        .filter_map(|target| target["name"].as_str().map(str::to_owned))
        .collect();
    names.sort();
    names.dedup();
    Ok(names
        .into_iter()
        .partition(|name| name.starts_with(REAL_TIER)))
}

/// The control plane and the images. The control plane's Go build is bound by the CPU
/// and the images' by downloads and unpacking, so on a cold machine the two overlap.
fn prerequisites() -> anyhow::Result<()> {
    let control_plane = std::thread::spawn(|| {
        crate::control_plane::ensure_built(crate::control_plane::Tier::Real).map(|_| ())
    });
    let images = crate::images::ensure_built(&[]);
    control_plane
        .join()
        .map_err(|_| anyhow::anyhow!("the control plane's build panicked"))??;
    images?;
    crate::control_plane::print_info();
    Ok(())
}

/// What a real node makes on the host and must remove: mounts under a harness folder,
/// its bridge, kube-proxy's chains and the Pod cgroups.
fn leftover_host_state() -> Vec<String> {
    let mut left: Vec<String> = std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .filter(|point| point.contains("/testenv-"))
        .map(|point| format!("mount {point}"))
        .collect();
    if std::path::Path::new("/sys/class/net/dbop0").exists() {
        left.push("bridge dbop0".to_owned());
    }
    if let Ok(output) = Command::new("iptables-save").arg("-t").arg("nat").output() {
        let chains = String::from_utf8_lossy(&output.stdout)
            .lines()
            .filter(|l| l.starts_with(":KUBE-"))
            .count();
        if chains > 0 {
            left.push(format!("{chains} KUBE-* chains in the nat table"));
        }
    }
    if let Ok(hierarchies) = std::fs::read_dir("/sys/fs/cgroup") {
        for hierarchy in hierarchies.filter_map(Result::ok) {
            if hierarchy.path().join("kubepods").exists() {
                left.push(format!("cgroup {}/kubepods", hierarchy.path().display()));
            }
        }
    }
    left
}

/// Processes whose command line points into a harness temporary folder.
fn leftover_components() -> Vec<String> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .chars()
                .all(|c| c.is_ascii_digit())
        })
        .filter_map(|e| {
            std::fs::read(e.path().join("cmdline"))
                .ok()
                .map(|c| (e.file_name(), c))
        })
        .map(|(pid, cmdline)| (pid, String::from_utf8_lossy(&cmdline).replace('\0', " ")))
        .filter(|(_, cmdline)| cmdline.contains("/testenv-") && !cmdline.contains("xtask"))
        .map(|(pid, cmdline)| {
            format!(
                "{}: {}",
                pid.to_string_lossy(),
                cmdline.chars().take(120).collect::<String>()
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::split_at_dashes;

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|a| (*a).to_owned()).collect()
    }

    #[test]
    fn cargo_options_go_before_the_dashes_and_test_filters_after() {
        let filters = strings(&["failover", "backup"]);
        assert_eq!(split_at_dashes(&filters), (&[][..], &filters[..]));
        let options = strings(&["-p", "database-controller"]);
        assert_eq!(split_at_dashes(&options), (&options[..], &[][..]));
        let both = strings(&["-p", "database-controller", "--", "failover"]);
        assert_eq!(split_at_dashes(&both), (&both[..2], &both[3..]));
    }
}
