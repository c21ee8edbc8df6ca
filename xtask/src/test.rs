//! `cargo xtask test`: the control-plane binaries (built once, then cached), every unit
//! test, and every acceptance test against a real kube-apiserver; then a check that no
//! component outlived its test.

use std::process::Command;
use std::time::Instant;

use anyhow::bail;

#[derive(clap::Args)]
pub struct TestArgs {
    /// Longer fault runs: 1,000 operations under SIGKILLs and 20 failover trials (about
    /// half an hour more). Each can also be set alone through FAULT_OPERATIONS and
    /// FAILOVER_TRIALS; FAULT_SEED repeats a chaos run.
    #[arg(long)]
    pub long: bool,
    /// Arguments passed on to `cargo test` after `--` (e.g. a test name filter).
    #[arg(trailing_var_arg = true)]
    pub cargo_test_args: Vec<String>,
}

pub fn run(args: &TestArgs) -> anyhow::Result<()> {
    let started = Instant::now();
    crate::control_plane::ensure_built()?;
    crate::control_plane::print_info();
    println!("control plane ready in {:.1?}", started.elapsed());

    // Components already running (e.g. `cargo xtask cluster up`) are not the tests' doing.
    let before = leftover_components();
    let tests = Instant::now();
    let mut command = Command::new(env!("CARGO"));
    if args.long {
        for (var, value) in [("FAULT_OPERATIONS", "1000"), ("FAILOVER_TRIALS", "20")] {
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
