//! `cargo xtask test`: the control-plane binaries and the engine images (built once,
//! then cached), every unit test, every acceptance test against a real kube-apiserver,
//! and the real tier's tests against real database servers; then a check that no
//! component outlived its test.

use std::process::Command;
use std::time::Instant;

use anyhow::bail;

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
    let status = command
        .current_dir(crate::workspace_root())
        .args(["test", "--workspace", "--locked", "--no-fail-fast"])
        .args(&args.cargo_test_args)
        .status()?;
    println!(
        "cargo test finished in {:.1?} ({:.1?} in all)",
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
    if !status.success() {
        bail!("cargo test failed with {status}");
    }
    // A small benchmark run, so that `cargo xtask bench` cannot rot.
    println!("bench smoke run");
    crate::bench::run(&crate::bench::BenchArgs::smoke())?;
    if !leftover_components()
        .into_iter()
        .all(|p| before.contains(&p))
    {
        bail!("components left running after the benchmark smoke run");
    }
    Ok(())
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
