//! `cargo xtask cluster up|down|status`: the test control plane in the background, for
//! people. `up` starts a detached `cluster serve` process that owns the control plane
//! until `down` sends it SIGTERM; the components die with it.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Subcommand;
use serde_json::json;
use testenv::{ControlPlane, Options};

#[derive(Subcommand, Clone, Copy)]
pub enum ClusterCommand {
    /// Start a control plane in the background and print the KUBECONFIG to use.
    Up {
        /// Also run kube-controller-manager, kube-scheduler and kwok with fake nodes.
        #[arg(long)]
        full: bool,
        /// Run a real node instead of fake ones: kubelet, containerd, kube-proxy,
        /// CoreDNS, disks, and the engine images (needs root).
        #[arg(long, conflicts_with = "full")]
        real: bool,
    },
    /// Stop the background control plane.
    Down,
    /// Say whether the background control plane runs, and where.
    Status,
    /// Run a control plane in the foreground until SIGTERM or Ctrl-C (what `up` starts).
    #[command(hide = true)]
    Serve {
        #[arg(long)]
        full: bool,
        #[arg(long)]
        real: bool,
    },
}

fn state_dir() -> PathBuf {
    testenv::assets::cache_dir()
        .parent()
        .map_or_else(std::env::temp_dir, |p| p.join("cluster"))
}

fn state_file() -> PathBuf {
    state_dir().join("state.json")
}

fn kubeconfig_file() -> PathBuf {
    state_dir().join("kubeconfig")
}

pub fn run(command: ClusterCommand) -> anyhow::Result<()> {
    match command {
        ClusterCommand::Up { full, real } => up(Tier::of(full, real)),
        ClusterCommand::Down => down(),
        ClusterCommand::Status => status(),
        ClusterCommand::Serve { full, real } => serve(Tier::of(full, real)),
    }
}

/// The pid of the running `serve` process, if any.
fn running() -> Option<u32> {
    let text = std::fs::read_to_string(state_file()).ok()?;
    let state: serde_json::Value = serde_json::from_str(&text).ok()?;
    let pid = u32::try_from(state["pid"].as_u64()?).ok()?;
    PathBuf::from(format!("/proc/{pid}"))
        .exists()
        .then_some(pid)
}

/// Which control plane `up` starts.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Tier {
    ApiServer,
    Full,
    Real,
}

impl Tier {
    fn of(full: bool, real: bool) -> Self {
        match (full, real) {
            (_, true) => Self::Real,
            (true, false) => Self::Full,
            (false, false) => Self::ApiServer,
        }
    }

    fn flag(self) -> Option<&'static str> {
        match self {
            Self::ApiServer => None,
            Self::Full => Some("--full"),
            Self::Real => Some("--real"),
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Self::ApiServer => "apiserver only",
            Self::Full => "full",
            Self::Real => "real node",
        }
    }

    /// The options, with every engine image for a real node.
    fn options(self) -> Options {
        match self {
            Self::ApiServer => Options::default(),
            Self::Full => Options::full(),
            Self::Real => {
                let ids: Vec<&str> = testenv::images::all().map(|r| r.id).collect();
                Options::real(&ids)
            }
        }
    }
}

fn up(tier: Tier) -> anyhow::Result<()> {
    if running().is_some() {
        println!("a control plane is already running");
        return status();
    }
    if tier == Tier::Real {
        crate::control_plane::ensure_built(crate::control_plane::Tier::Real)?;
        crate::images::ensure_built(&[])?;
    } else {
        crate::control_plane::ensure_built(crate::control_plane::Tier::Full)?;
    }
    std::fs::create_dir_all(state_dir())?;
    let _ = std::fs::remove_file(state_file());
    let log_path = state_dir().join("serve.log");
    let log = std::fs::File::create(&log_path)?;
    let mut command = Command::new(std::env::current_exe()?);
    command.args(["cluster", "serve"]);
    command.args(tier.flag());
    let mut child = {
        use std::os::unix::process::CommandExt;
        // Its own process group: Ctrl-C in this terminal must not reach it.
        command
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()?
    };
    let deadline = Instant::now() + Duration::from_secs(240);
    while running().is_none() {
        if let Some(status) = child.try_wait()? {
            let log = std::fs::read_to_string(&log_path).unwrap_or_default();
            bail!("the control plane exited with {status}:\n{log}");
        }
        if Instant::now() > deadline {
            bail!(
                "the control plane did not start within 4 minutes; see {}",
                log_path.display()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    status()
}

fn down() -> anyhow::Result<()> {
    let Some(pid) = running() else {
        println!("no control plane is running");
        return Ok(());
    };
    let status = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()?;
    if !status.success() {
        bail!("could not signal process {pid}");
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while PathBuf::from(format!("/proc/{pid}")).exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = std::fs::remove_file(state_file());
    println!("control plane stopped");
    Ok(())
}

fn status() -> anyhow::Result<()> {
    let Some(pid) = running() else {
        println!("no control plane is running; start one with `cargo xtask cluster up [--full]`");
        return Ok(());
    };
    let state: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(state_file())?)?;
    println!(
        "control plane running (pid {pid}, {}), API server {}",
        state["tier"].as_str().unwrap_or("?"),
        state["server"].as_str().unwrap_or("?")
    );
    println!("export KUBECONFIG={}", kubeconfig_file().display());
    Ok(())
}

fn serve(tier: Tier) -> anyhow::Result<()> {
    // One thread: the components are tied to the thread that started them.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let plane = ControlPlane::start(tier.options()).await.context("starting the control plane")?;
        std::fs::copy(plane.kubeconfig(), kubeconfig_file())?;
        let state = json!({"pid": std::process::id(), "server": plane.server(), "tier": tier.describe(), "dir": plane.dir()});
        std::fs::write(state_file(), serde_json::to_vec_pretty(&state)?)?;
        println!("control plane ready at {} (files in {})", plane.server(), plane.dir().display());
        let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            _ = terminate.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
        drop(plane);
        let _ = std::fs::remove_file(state_file());
        let _ = std::fs::remove_file(kubeconfig_file());
        anyhow::Ok(())
    })
}
