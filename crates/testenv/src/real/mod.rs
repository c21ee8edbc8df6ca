//! The real tier's node: containerd and runc, a CNI bridge, the kubelet, kube-proxy in
//! iptables mode, CoreDNS for `cluster.local`, and disks that behave like cloud disks.
//! Pods run for real, from images built locally (see [`crate::images`]).
//!
//! One real node runs on a machine at a time (a lock file), because the bridge, the
//! kubelet's port and kube-proxy's chains are machine-wide. Stopping it removes
//! everything it made on the host; a node whose process was killed is cleaned up by
//! the next one to start.

mod containerd;
mod disks;
mod host;
mod kubelet;
mod network;
mod services;
mod sweep;

use std::fs::File;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};

pub use disks::STORAGE_CLASS;
pub use host::CommandFailed;
pub use kubelet::NODE_NAME;
pub use network::{NODE_IP, POD_SUBNET};

use crate::images;
use crate::kubeconfig::{self, Credentials};
use crate::pki::TestCa;
use crate::ports::free_port;
use crate::process::Process;

/// Why the real node could not start.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error(transparent)]
    Command(#[from] CommandFailed),
    #[error(transparent)]
    Image(#[from] images::NotBuilt),
    #[error("preparing the node: {0}")]
    Io(#[from] std::io::Error),
    #[error("creating the node's certificates: {0}")]
    Certificates(#[from] rcgen::Error),
    #[error(
        "the real tier needs root (it runs containers, mounts disks and writes iptables rules)"
    )]
    NotRoot,
    #[error("talking to the API server: {0}")]
    Kube(#[from] kube::Error),
    #[error("preparing the disks: {0}")]
    Disk(#[from] disks::DiskError),
}

/// Files the control plane gives the node.
pub struct NodeInputs<'a> {
    /// The control plane's folder; the node works in `<root>/node`.
    pub root: &'a Path,
    pub ca: &'a TestCa,
    /// The CA certificate file (clients of the kubelet are checked against it).
    pub ca_file: PathBuf,
    pub server: &'a str,
    /// An admin kubeconfig (CoreDNS reads the cluster with it).
    pub admin_kubeconfig: PathBuf,
    /// Image recipe ids to make available besides the pause image.
    pub images: &'a [String],
}

/// A running node; [`RealNode::stop`] (or drop) removes it from the host.
pub struct RealNode {
    dir: PathBuf,
    processes: Vec<Process>,
    disks: Option<tokio::task::JoinHandle<()>>,
    sysctls: Vec<(String, String)>,
    _lock: File,
}

/// The machine-wide folder of the real tier: its lock, the name of the last node's
/// folder, and containerd's image store (kept between runs so images import once).
fn state_dir() -> PathBuf {
    crate::assets::cache_root().join("node")
}

impl RealNode {
    /// Starts the node's processes. The caller then waits for [`RealNode::ready`].
    pub async fn start(inputs: NodeInputs<'_>) -> Result<Self, NodeError> {
        if !host::run("id", &["-u"]).is_ok_and(|uid| uid.trim() == "0") {
            return Err(NodeError::NotRoot);
        }
        let state = state_dir();
        std::fs::create_dir_all(&state)?;
        let lock_path = state.join("lock");
        let lock = tokio::task::spawn_blocking(move || -> std::io::Result<File> {
            let file = File::options()
                .create(true)
                .truncate(false)
                .write(true)
                .open(lock_path)?;
            file.lock()?;
            Ok(file)
        })
        .await
        .map_err(|e| std::io::Error::other(e.to_string()))??;
        clean_previous_run(&state);
        let dir = inputs.root.join("node");
        std::fs::create_dir_all(&dir)?;
        std::fs::write(state.join("last-dir"), dir.display().to_string())?;

        let mut node = Self {
            dir: dir.clone(),
            processes: Vec::new(),
            disks: None,
            sysctls: Vec::new(),
            _lock: lock,
        };
        node.sysctls = network::create_bridge()?;
        node.start_containerd(&state, inputs.images)?;
        node.start_kubelet(&inputs)?;
        node.start_services(&inputs)?;
        Ok(node)
    }

    fn start_containerd(&mut self, state: &Path, wanted: &[String]) -> Result<(), NodeError> {
        let dir = self.dir.join("containerd");
        let cni_conf = self.dir.join("cni");
        std::fs::create_dir_all(&dir)?;
        std::fs::create_dir_all(&cni_conf)?;
        std::fs::write(
            cni_conf.join("10-testenv.conflist"),
            network::cni_config(&self.dir.join("cni-ipam")).to_string(),
        )?;
        // The image store outlives the node; the runtime state does not.
        let store = state.join("containerd-root");
        std::fs::create_dir_all(&store)?;
        let config = containerd::config(&dir, &store, &containerd::cni_bin_dir(), &cni_conf);
        std::fs::write(dir.join("config.toml"), config)?;
        let binary = which("containerd")?;
        self.processes.push(Process::spawn(
            "containerd",
            &binary,
            &[format!("--config={}", dir.join("config.toml").display())],
            &self.dir,
        )?);
        wait_for_file(&containerd::socket(&dir))?;
        containerd::remove_old_containers(&dir);
        for id in std::iter::once(images::PAUSE_ID).chain(wanted.iter().map(String::as_str)) {
            let archive = images::find(id)?;
            containerd::import_once(&dir, &store, id, &archive)?;
        }
        Ok(())
    }

    fn start_kubelet(&mut self, inputs: &NodeInputs<'_>) -> Result<(), NodeError> {
        let dir = self.dir.join("kubelet");
        std::fs::create_dir_all(&dir)?;
        let credentials = inputs
            .ca
            .issue_client(&format!("system:node:{NODE_NAME}"), &["system:nodes"])?;
        let kubeconfig = dir.join("kubelet.kubeconfig");
        std::fs::write(
            &kubeconfig,
            kubeconfig::render(
                inputs.server,
                inputs.ca.cert_pem(),
                &format!("system:node:{NODE_NAME}"),
                &Credentials::ClientCertificate(&credentials),
            ),
        )?;
        std::fs::write(
            dir.join("kubelet.yaml"),
            kubelet::config(
                &dir,
                &containerd::socket(&self.dir.join("containerd")),
                &inputs.ca_file,
                free_port()?,
            ),
        )?;
        let binary =
            crate::assets::find("kubelet").map_err(|e| std::io::Error::other(e.to_string()))?;
        self.processes.push(Process::spawn(
            "kubelet",
            &binary,
            &kubelet::args(&dir, &kubeconfig),
            &self.dir,
        )?);
        Ok(())
    }

    fn start_services(&mut self, inputs: &NodeInputs<'_>) -> Result<(), NodeError> {
        let credentials = inputs.ca.issue_client("system:kube-proxy", &[])?;
        let kubeconfig = self.dir.join("kube-proxy.kubeconfig");
        std::fs::write(
            &kubeconfig,
            kubeconfig::render(
                inputs.server,
                inputs.ca.cert_pem(),
                "system:kube-proxy",
                &Credentials::ClientCertificate(&credentials),
            ),
        )?;
        let config = self.dir.join("kube-proxy.yaml");
        std::fs::write(
            &config,
            services::kube_proxy_config(&kubeconfig, free_port()?, free_port()?),
        )?;
        let binary =
            crate::assets::find("kube-proxy").map_err(|e| std::io::Error::other(e.to_string()))?;
        self.processes.push(Process::spawn(
            "kube-proxy",
            &binary,
            &[format!("--config={}", config.display())],
            &self.dir,
        )?);

        let corefile = self.dir.join("Corefile");
        std::fs::write(
            &corefile,
            services::corefile(&inputs.admin_kubeconfig, free_port()?),
        )?;
        let binary =
            crate::assets::find("coredns").map_err(|e| std::io::Error::other(e.to_string()))?;
        self.processes.push(Process::spawn(
            "coredns",
            &binary,
            &["-conf".to_owned(), corefile.display().to_string()],
            &self.dir,
        )?);
        Ok(())
    }

    /// Creates the default StorageClass and starts the disk provisioner.
    pub async fn prepare_cluster(&mut self, client: &Client) -> Result<(), NodeError> {
        let classes: Api<StorageClass> = Api::all(client.clone());
        classes
            .patch(
                STORAGE_CLASS,
                &PatchParams::apply("testenv").force(),
                &Patch::Apply(disks::storage_class()),
            )
            .await?;
        let disks = self.dir.join("disks");
        disks::prepare_dir(&disks)?;
        self.disks = Some(disks::spawn(client.clone(), disks));
        Ok(())
    }

    /// Whether the node reports Ready.
    pub async fn ready(client: &Client) -> bool {
        let nodes: Api<Node> = Api::all(client.clone());
        nodes
            .get_opt(NODE_NAME)
            .await
            .ok()
            .flatten()
            .is_some_and(|node| {
                node.status
                    .and_then(|s| s.conditions)
                    .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
            })
    }

    /// The node's processes, for the control plane's start-up checks.
    pub fn processes_mut(&mut self) -> &mut Vec<Process> {
        &mut self.processes
    }

    /// The last lines of one node component's log.
    pub fn log_tail(&self, component: &str, lines: usize) -> Option<String> {
        self.processes
            .iter()
            .find(|p| p.name() == component)
            .map(|p| p.log_tail(lines))
    }

    /// Stops every process and removes what the node made on the host. Returns false
    /// when a mount under the node's folder could not be removed (the folder must then
    /// be kept, or deleting it would reach into the mounted filesystem).
    pub fn stop(&mut self) -> bool {
        if let Some(disks) = self.disks.take() {
            disks.abort();
        }
        while let Some(mut process) = self.processes.pop() {
            process.stop();
        }
        let left = sweep::sweep(&self.dir);
        for (name, value) in self.sysctls.drain(..) {
            let _ = host::set_sysctl(&name, &value);
        }
        if !left.is_empty() {
            tracing::warn!(mounts = ?left, "mounts left under the node's folder; keeping it");
        }
        left.is_empty()
    }
}

impl Drop for RealNode {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Sweeps what a node killed before its clean-up left behind.
fn clean_previous_run(state: &Path) {
    let previous = std::fs::read_to_string(state.join("last-dir")).unwrap_or_default();
    let previous = PathBuf::from(previous.trim());
    if previous.as_os_str().is_empty() {
        sweep::sweep(Path::new("/nonexistent-testenv-node"));
        return;
    }
    let left = sweep::sweep(&previous);
    // The folder of a killed control plane: `<temp>/testenv-*/node`.
    let plane = previous.parent().filter(|p| {
        previous.ends_with("node")
            && p.parent() == Some(std::env::temp_dir().as_path())
            && p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("testenv-"))
    });
    if let (true, Some(plane)) = (left.is_empty(), plane) {
        let _ = std::fs::remove_dir_all(plane);
    }
}

fn which(binary: &str) -> Result<PathBuf, NodeError> {
    [
        "/usr/bin",
        "/usr/sbin",
        "/usr/local/bin",
        "/usr/local/sbin",
        "/bin",
        "/sbin",
    ]
    .iter()
    .map(|dir| Path::new(dir).join(binary))
    .find(|p| p.is_file())
    .ok_or_else(|| {
        NodeError::Io(std::io::Error::other(format!(
            "{binary} not found; the real tier needs Debian's containerd, runc, \
                 containernetworking-plugins, iptables and conntrack packages"
        )))
    })
}

fn wait_for_file(path: &Path) -> Result<(), NodeError> {
    for _ in 0..200 {
        if path.exists() {
            return Ok(());
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    Err(NodeError::Io(std::io::Error::other(format!(
        "{} did not appear within 10 s",
        path.display()
    ))))
}
