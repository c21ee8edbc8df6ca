//! Starting, reaching and stopping the local control plane.

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};
use tempfile::TempDir;

use crate::assets;
use crate::error::{ATTACH_ENV, Error};
use crate::full;
use crate::kubeconfig::{self, Credentials};
use crate::pki::{self, CertifiedKey, TestCa};
use crate::ports::free_port;
use crate::process::Process;
use crate::real::{NodeInputs, RealNode};

/// How long each component may take to become ready.
const READY_TIMEOUT: Duration = Duration::from_secs(90);
/// Whole-start attempts; a port taken between choosing and binding it is the usual cause
/// of a failed attempt.
const START_ATTEMPTS: usize = 3;

/// What to run.
#[derive(Clone, Debug)]
// Each flag switches one independent part of the harness on.
#[allow(clippy::struct_excessive_bools)]
pub struct Options {
    /// Also run kube-controller-manager, kube-scheduler and kwok with fake nodes.
    pub full: bool,
    /// Fake nodes in full mode.
    pub nodes: usize,
    /// Write an audit log of every write request (see [`ControlPlane::audit_events`]).
    pub audit: bool,
    /// With `audit`, log reads (get, list, watch) too.
    pub audit_reads: bool,
    /// Extra kube-apiserver flags.
    pub apiserver_args: Vec<String>,
    /// Run a real node (kubelet, containerd, kube-proxy, CoreDNS, disks) instead of
    /// kwok's fake ones; implies `full`.
    pub real: bool,
    /// With `real`: the image recipes (`postgres-17`, ...) the node should have.
    pub images: Vec<String>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            full: false,
            nodes: 3,
            audit: false,
            audit_reads: false,
            apiserver_args: Vec::new(),
            real: false,
            images: Vec::new(),
        }
    }
}

impl Options {
    /// The full tier: workloads get Pods that become Ready and volumes that bind.
    pub fn full() -> Self {
        Self {
            full: true,
            ..Self::default()
        }
    }

    /// The real tier: the full control plane and one real node whose containerd holds
    /// the images of `images` (recipe ids such as `postgres-17`). Needs root. A test
    /// target that uses it is named `real_*`: `cargo xtask test` runs those in a lane of
    /// their own, since the machine has one real node.
    pub fn real(images: &[&str]) -> Self {
        Self {
            full: true,
            real: true,
            images: images.iter().map(|i| (*i).to_owned()).collect(),
            ..Self::default()
        }
    }

    /// Turns on the audit log of write requests.
    #[must_use]
    pub fn with_audit(mut self) -> Self {
        self.audit = true;
        self
    }

    /// Turns on the audit log of every request, reads included.
    #[must_use]
    pub fn with_full_audit(mut self) -> Self {
        self.audit = true;
        self.audit_reads = true;
        self
    }
}

/// A running control plane. Dropping it stops every component and deletes its files.
pub struct ControlPlane {
    // Field order matters only for clarity: Drop stops processes explicitly first.
    processes: Vec<Process>,
    dir: TempDir,
    ca: Authority,
    server: String,
    kubeconfig: PathBuf,
    audit_log: Option<PathBuf>,
    full: bool,
    /// How kube-apiserver was started, to start it again (or a second one).
    apiserver: Option<(PathBuf, Vec<String>)>,
    etcd_url: String,
    /// The full tier's volume provisioner, stopped with the control plane.
    provisioner: Option<tokio::task::JoinHandle<()>>,
    /// The real tier's node, stopped before the control plane.
    node: Option<RealNode>,
    /// Attached to a cluster someone else runs (see [`ATTACH_ENV`]).
    attached: bool,
}

/// Who signs the control plane's certificates: its own CA, or, attached, nobody this
/// side holds the key of.
enum Authority {
    Own(Box<TestCa>),
    Existing(String),
}

impl Authority {
    fn cert_pem(&self) -> &str {
        match self {
            Self::Own(ca) => ca.cert_pem(),
            Self::Existing(pem) => pem,
        }
    }

    fn own(&self, what: &str) -> Result<&TestCa, Error> {
        match self {
            Self::Own(ca) => Ok(ca),
            Self::Existing(_) => Err(Error::Unsupported(what.to_owned())),
        }
    }
}

impl ControlPlane {
    /// Starts the control plane and waits until it serves requests (and, in full mode,
    /// until the fake nodes are Ready).
    pub async fn start(options: Options) -> Result<Self, Error> {
        if let Some(kubeconfig) = std::env::var_os(ATTACH_ENV).filter(|v| !v.is_empty()) {
            return Self::attach(PathBuf::from(kubeconfig), &options);
        }
        let mut last = None;
        for attempt in 1..=START_ATTEMPTS {
            match Self::start_once(&options).await {
                Ok(plane) => return Ok(plane),
                Err(err) => {
                    tracing::warn!(attempt, error = %err, "control plane did not start");
                    last = Some(err);
                }
            }
        }
        Err(last.unwrap_or_else(|| Error::Io(std::io::Error::other("no start attempted"))))
    }

    async fn start_once(options: &Options) -> Result<Self, Error> {
        let etcd_bin = assets::find("etcd")?;
        let apiserver_bin = assets::find("kube-apiserver")?;
        let dir = tempfile::Builder::new().prefix("testenv-").tempdir()?;
        let root = dir.path();

        let (ca, admin) = write_pki(root)?;

        let mut plane = Self {
            processes: Vec::new(),
            server: String::new(),
            kubeconfig: root.join("admin.kubeconfig"),
            audit_log: options.audit.then(|| root.join("audit.log")),
            ca: Authority::Own(Box::new(ca)),
            dir,
            full: options.full,
            apiserver: None,
            etcd_url: String::new(),
            provisioner: None,
            node: None,
            attached: false,
        };
        let root = plane.dir.path().to_path_buf();

        let etcd_port = plane.start_etcd(&etcd_bin).await?;

        let api_port = free_port()?;
        plane.server = format!("https://127.0.0.1:{api_port}");
        std::fs::write(
            &plane.kubeconfig,
            kubeconfig::render(
                &plane.server,
                plane.ca.cert_pem(),
                "admin",
                &Credentials::ClientCertificate(&admin),
            ),
        )?;
        let mut args = apiserver_args(&root, etcd_port, api_port, options.full);
        args.extend(plane.optional_apiserver_args(options)?);
        args.extend(options.apiserver_args.iter().cloned());
        plane.processes.push(Process::spawn(
            "kube-apiserver",
            &apiserver_bin,
            &args,
            &root,
        )?);
        plane.apiserver = Some((apiserver_bin, args));
        let client = plane.client().await?;
        plane.wait_for_apiserver(&client).await?;

        plane.start_nodes(options, &client).await?;
        Ok(plane)
    }

    /// Starts etcd on a free port and waits until it listens; returns its client port.
    async fn start_etcd(&mut self, etcd_bin: &Path) -> Result<u16, Error> {
        let root = self.dir.path().to_path_buf();
        let etcd_port = free_port()?;
        let etcd_peer_port = free_port()?;
        let etcd = Process::spawn(
            "etcd",
            etcd_bin,
            &etcd_args(&root, etcd_port, etcd_peer_port),
            &root,
        )?;
        self.processes.push(etcd);
        self.etcd_url = format!("http://127.0.0.1:{etcd_port}");
        self.wait_for_port(etcd_port, "etcd").await?;
        Ok(etcd_port)
    }

    /// kube-apiserver flags for the options that need them: the kubelet client of the
    /// real tier, and the audit log.
    fn optional_apiserver_args(&self, options: &Options) -> Result<Vec<String>, Error> {
        let root = self.dir.path();
        let mut args = Vec::new();
        if options.real {
            // Logs, exec and port-forward go from the API server to the kubelet.
            let kubelet_client = self
                .ca
                .own("a kubelet client certificate")?
                .issue_client("kube-apiserver-kubelet-client", &["system:masters"])?;
            write(root, "kubelet-client.crt", &kubelet_client.cert_pem)?;
            write(root, "kubelet-client.key", &kubelet_client.key_pem)?;
            args.extend([
                "--kubelet-preferred-address-types=InternalIP".to_owned(),
                format!(
                    "--kubelet-client-certificate={}",
                    root.join("kubelet-client.crt").display()
                ),
                format!(
                    "--kubelet-client-key={}",
                    root.join("kubelet-client.key").display()
                ),
            ]);
        }
        if let Some(audit) = &self.audit_log {
            write(
                root,
                "audit-policy.yaml",
                if options.audit_reads {
                    AUDIT_ALL_POLICY
                } else {
                    AUDIT_POLICY
                },
            )?;
            args.push(format!(
                "--audit-policy-file={}",
                root.join("audit-policy.yaml").display()
            ));
            args.push(format!("--audit-log-path={}", audit.display()));
            args.push("--audit-log-format=json".into());
            // One file, never rotated (the default rotates at 100 MB, about 10,000
            // Databases' writes), so readers see every request.
            args.push("--audit-log-maxsize=1000000".into());
        }
        Ok(args)
    }

    /// The full tier's controllers and nodes: a real node, or kwok's fake ones.
    async fn start_nodes(&mut self, options: &Options, client: &Client) -> Result<(), Error> {
        let root = self.dir.path().to_path_buf();
        if options.real {
            let components = full::spawn_components(&root, &self.kubeconfig, true)?;
            self.processes.extend(components);
            let mut node = RealNode::start(NodeInputs {
                root: &root,
                ca: self.ca.own("a real node")?,
                ca_file: root.join("ca.crt"),
                server: &self.server,
                admin_kubeconfig: self.kubeconfig.clone(),
                images: &options.images,
            })
            .await?;
            node.prepare_cluster(client).await?;
            self.node = Some(node);
            self.wait_until("the real node Ready", || RealNode::ready(client))
                .await?;
        } else if options.full {
            let components = full::spawn_components(&root, &self.kubeconfig, false)?;
            self.processes.extend(components);
            self.provisioner = Some(crate::volumes::spawn(client.clone()));
            full::prepare_cluster(client, options.nodes).await?;
            self.wait_until("fake nodes Ready", || {
                full::nodes_ready(client, options.nodes)
            })
            .await?;
        }
        Ok(())
    }

    /// Whether a real node runs (the real tier).
    pub fn is_real(&self) -> bool {
        self.node.is_some() || self.attached
    }

    /// `http://127.0.0.1:<port>` of etcd's client endpoint.
    pub fn etcd_url(&self) -> &str {
        &self.etcd_url
    }

    /// Stops kube-apiserver (SIGKILL); [`ControlPlane::start_apiserver`] brings it back on
    /// the same port with the same flags.
    pub fn stop_apiserver(&mut self) {
        if let Some(index) = self
            .processes
            .iter()
            .position(|p| p.name() == "kube-apiserver")
        {
            let mut process = self.processes.remove(index);
            process.stop();
        }
    }

    /// Starts kube-apiserver again after [`ControlPlane::stop_apiserver`] and waits until
    /// it is ready.
    pub async fn start_apiserver(&mut self) -> Result<(), Error> {
        let Some((binary, args)) = self.apiserver.clone() else {
            return Ok(());
        };
        let process = Process::spawn("kube-apiserver", &binary, &args, self.dir.path())?;
        // Keep the start order: the API server before its clients, so Drop stops it last
        // but one.
        self.processes.insert(1, process);
        let client = self.client().await?;
        self.wait_for_apiserver(&client).await
    }

    /// Starts a second kube-apiserver on the same etcd (another port, no audit log) and
    /// returns a kubeconfig for it: a way to change the cluster while the first one is
    /// down.
    pub async fn start_second_apiserver(&mut self) -> Result<PathBuf, Error> {
        let Some((binary, args)) = self.apiserver.clone() else {
            return Err(Error::Io(std::io::Error::other("no API server")));
        };
        let port = free_port()?;
        let args: Vec<String> = args
            .into_iter()
            .filter(|a| !a.starts_with("--audit-"))
            .map(|a| {
                if a.starts_with("--secure-port=") {
                    format!("--secure-port={port}")
                } else {
                    a
                }
            })
            .collect();
        self.processes.push(Process::spawn(
            "kube-apiserver-2",
            &binary,
            &args,
            self.dir.path(),
        )?);
        let server = format!("https://127.0.0.1:{port}");
        let admin = self
            .ca
            .own("a second API server")?
            .issue_client("admin", &["system:masters"])?;
        let path = self.dir.path().join("second.kubeconfig");
        std::fs::write(
            &path,
            kubeconfig::render(
                &server,
                self.ca.cert_pem(),
                "admin",
                &Credentials::ClientCertificate(&admin),
            ),
        )?;
        let client = client_from(&path).await?;
        self.wait_for_apiserver(&client).await?;
        Ok(path)
    }

    /// Stops a component started by name (e.g. the second API server).
    pub fn stop_component(&mut self, name: &str) {
        if let Some(index) = self.processes.iter().position(|p| p.name() == name) {
            let mut process = self.processes.remove(index);
            process.stop();
        }
    }

    /// `https://127.0.0.1:<port>` of the API server.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// Path of the admin kubeconfig (user `admin` in `system:masters`).
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// The process ids of the components named `name` (`kube-apiserver`, `etcd`, ...),
    /// for a benchmark that reads their CPU time.
    pub fn pids_of(&self, name: &str) -> Vec<u32> {
        self.processes
            .iter()
            .filter(|p| p.name() == name)
            .map(Process::pid)
            .collect()
    }

    /// The CA that signed the API server's certificate and every client certificate.
    pub fn ca_pem(&self) -> &str {
        self.ca.cert_pem()
    }

    /// The folder holding certificates, data and component logs.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Whether controller-manager, scheduler and kwok run too.
    pub fn is_full(&self) -> bool {
        self.full
    }

    /// Whether this is a cluster someone else runs ([`ATTACH_ENV`]): its nodes, disks and
    /// images are not this process's to look into.
    pub fn is_attached(&self) -> bool {
        self.attached
    }

    /// The cluster `kubeconfig` names, for `options` that an existing cluster can meet.
    fn attach(kubeconfig: PathBuf, options: &Options) -> Result<Self, Error> {
        if options.audit {
            return Err(Error::Unsupported("the audit log".to_owned()));
        }
        let config = kube::config::Kubeconfig::read_from(&kubeconfig)?;
        let context = config.current_context.clone().unwrap_or_default();
        let cluster_name = config
            .contexts
            .iter()
            .find(|c| c.name == context)
            .and_then(|c| c.context.as_ref())
            .map(|c| c.cluster.clone())
            .unwrap_or_default();
        let cluster = config
            .clusters
            .iter()
            .find(|c| c.name == cluster_name)
            .and_then(|c| c.cluster.clone())
            .unwrap_or_default();
        let ca_pem = match (
            &cluster.certificate_authority_data,
            &cluster.certificate_authority,
        ) {
            (Some(data), _) => String::from_utf8(
                base64::Engine::decode(&base64::engine::general_purpose::STANDARD, data)
                    .map_err(std::io::Error::other)?,
            )
            .map_err(std::io::Error::other)?,
            (None, Some(file)) => std::fs::read_to_string(file)?,
            (None, None) => String::new(),
        };
        Ok(Self {
            processes: Vec::new(),
            dir: tempfile::Builder::new()
                .prefix("testenv-attached-")
                .tempdir()?,
            ca: Authority::Existing(ca_pem),
            server: cluster.server.unwrap_or_default(),
            kubeconfig,
            audit_log: None,
            full: true,
            apiserver: None,
            etcd_url: String::new(),
            provisioner: None,
            node: None,
            attached: true,
        })
    }

    /// An admin client.
    pub async fn client(&self) -> Result<Client, Error> {
        client_from(&self.kubeconfig).await
    }

    /// Writes a kubeconfig for `user` in `groups`, authenticated by a client certificate,
    /// e.g. to run a component with exactly the RBAC it is granted.
    pub fn kubeconfig_for(&self, user: &str, groups: &[&str]) -> Result<PathBuf, Error> {
        let credentials = self
            .ca
            .own("a client certificate")?
            .issue_client(user, groups)?;
        self.write_kubeconfig(user, &Credentials::ClientCertificate(&credentials))
    }

    /// Writes a kubeconfig that authenticates with a bearer `token` (e.g. a
    /// ServiceAccount token from the TokenRequest API).
    pub fn kubeconfig_for_token(&self, name: &str, token: &str) -> Result<PathBuf, Error> {
        self.write_kubeconfig(name, &Credentials::Token(token))
    }

    fn write_kubeconfig(
        &self,
        user: &str,
        credentials: &Credentials<'_>,
    ) -> Result<PathBuf, Error> {
        let file_name: String = user
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        let path = self.dir.path().join(format!("{file_name}.kubeconfig"));
        std::fs::write(
            &path,
            kubeconfig::render(&self.server, self.ca.cert_pem(), user, credentials),
        )?;
        Ok(path)
    }

    /// `kubectl` of the pinned version, pointed at this control plane.
    pub fn kubectl(&self) -> Result<std::process::Command, Error> {
        let binary = match assets::find("kubectl") {
            Ok(pinned) => pinned,
            // An existing cluster comes with its own kubectl on PATH.
            Err(_) if self.attached => PathBuf::from("kubectl"),
            Err(missing) => return Err(missing.into()),
        };
        let mut command = std::process::Command::new(binary);
        command.arg("--kubeconfig").arg(&self.kubeconfig);
        Ok(command)
    }

    /// Every audit event logged so far (write requests only), oldest first. Empty unless
    /// the control plane was started [`Options::with_audit`].
    pub fn audit_events(&self) -> Vec<serde_json::Value> {
        let Some(path) = &self.audit_log else {
            return Vec::new();
        };
        std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect()
    }

    /// The completed requests `user` made, from the audit log, oldest first.
    pub fn requests_by(&self, user: &str) -> Vec<serde_json::Value> {
        self.audit_events()
            .into_iter()
            .filter(|e| e["user"]["username"] == user && e["stage"] == "ResponseComplete")
            .collect()
    }

    /// `requests_by(user)` as `"<verb> <request URI>"` lines, for assertion messages.
    pub fn request_lines_by(&self, user: &str) -> Vec<String> {
        self.requests_by(user)
            .iter()
            .map(|e| {
                format!(
                    "{} {}",
                    e["verb"].as_str().unwrap_or(""),
                    e["requestURI"].as_str().unwrap_or("")
                )
            })
            .collect()
    }

    /// The last lines of one component's log.
    pub fn log_tail(&self, component: &str, lines: usize) -> Option<String> {
        self.processes
            .iter()
            .find(|p| p.name() == component)
            .map(|p| p.log_tail(lines))
            .or_else(|| self.node.as_ref()?.log_tail(component, lines))
    }

    async fn wait_for_port(&mut self, port: u16, what: &str) -> Result<(), Error> {
        self.wait_until(what, || async move {
            tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
        })
        .await
    }

    async fn wait_for_apiserver(&mut self, client: &Client) -> Result<(), Error> {
        self.wait_until("kube-apiserver /readyz", || async {
            let request = http::Request::get("/readyz").body(Vec::new());
            match request {
                Ok(request) => client
                    .request_text(request)
                    .await
                    .is_ok_and(|body| body.trim() == "ok"),
                Err(_) => false,
            }
        })
        .await?;
        let namespaces: Api<Namespace> = Api::all(client.clone());
        self.wait_until("namespace default", || async {
            namespaces.get_opt("default").await.ok().flatten().is_some()
        })
        .await
    }

    /// Polls `ready` until it holds, failing early if any component exits.
    async fn wait_until<F, Fut>(&mut self, what: &str, mut ready: F) -> Result<(), Error>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        let deadline = tokio::time::Instant::now() + READY_TIMEOUT;
        loop {
            let node_processes = self
                .node
                .as_mut()
                .map(|n| n.processes_mut().iter_mut())
                .into_iter()
                .flatten();
            for process in self.processes.iter_mut().chain(node_processes) {
                if let Some(status) = process.exited() {
                    return Err(Error::Exited {
                        component: process.name().to_owned(),
                        status: status.to_string(),
                        log: process.log_tail(30),
                    });
                }
            }
            if ready().await {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                let log = self
                    .processes
                    .last()
                    .map(|p| p.log_tail(30))
                    .unwrap_or_default();
                return Err(Error::NotReady {
                    what: what.to_owned(),
                    timeout: READY_TIMEOUT,
                    log,
                });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        if let Some(provisioner) = self.provisioner.take() {
            provisioner.abort();
        }
        // The node first: its clean-up must finish before the folder it works in goes.
        if let Some(mut node) = self.node.take()
            && !node.stop()
        {
            self.dir.disable_cleanup(true);
        }
        // Stop in reverse start order: clients of the API server first, etcd last.
        while let Some(mut process) = self.processes.pop() {
            process.stop();
        }
    }
}

/// A client for the kubeconfig at `path`.
pub async fn client_from(path: &Path) -> Result<Client, Error> {
    let kubeconfig = Kubeconfig::read_from(path)?;
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
    Ok(Client::try_from(config)?)
}

/// Creates the test CA and writes into `root` what the API server serves and signs
/// with: the CA, its serving certificate and the service-account key pair. Returns the
/// CA and the admin's client certificate.
fn write_pki(root: &Path) -> Result<(TestCa, CertifiedKey), Error> {
    let ca = TestCa::new("testenv-ca")?;
    let serving = ca.issue_server(&[
        "127.0.0.1",
        "localhost",
        "kubernetes",
        "kubernetes.default.svc",
        "kubernetes.default.svc.cluster.local",
    ])?;
    let admin = ca.issue_client("admin", &["system:masters"])?;
    write(root, "ca.crt", ca.cert_pem())?;
    write(root, "apiserver.crt", &serving.cert_pem)?;
    write(root, "apiserver.key", &serving.key_pem)?;
    let (sa_key, sa_pub) = pki::key_pair_pem()?;
    write(root, "sa.key", &sa_key)?;
    write(root, "sa.pub", &sa_pub)?;
    Ok((ca, admin))
}

fn write(dir: &Path, name: &str, contents: &str) -> std::io::Result<()> {
    std::fs::write(dir.join(name), contents)
}

fn etcd_args(root: &Path, client_port: u16, peer_port: u16) -> Vec<String> {
    let client = format!("http://127.0.0.1:{client_port}");
    let peer = format!("http://127.0.0.1:{peer_port}");
    vec![
        "--name=node0".into(),
        format!("--data-dir={}", root.join("etcd").display()),
        format!("--listen-client-urls={client}"),
        format!("--advertise-client-urls={client}"),
        format!("--listen-peer-urls={peer}"),
        format!("--initial-advertise-peer-urls={peer}"),
        format!("--initial-cluster=node0={peer}"),
        // Test data is thrown away, so durability buys nothing and fsync costs a lot.
        "--unsafe-no-fsync=true".into(),
        "--auto-compaction-retention=1".into(),
        "--log-level=warn".into(),
    ]
}

fn apiserver_args(root: &Path, etcd_port: u16, port: u16, full: bool) -> Vec<String> {
    let file = |name: &str| root.join(name).display().to_string();
    let mut args = vec![
        format!("--etcd-servers=http://127.0.0.1:{etcd_port}"),
        "--bind-address=127.0.0.1".into(),
        format!("--secure-port={port}"),
        // A loopback advertise address is only accepted without an endpoint reconciler.
        "--advertise-address=127.0.0.1".into(),
        "--endpoint-reconciler-type=none".into(),
        format!("--cert-dir={}", file("apiserver-certs")),
        format!("--tls-cert-file={}", file("apiserver.crt")),
        format!("--tls-private-key-file={}", file("apiserver.key")),
        format!("--client-ca-file={}", file("ca.crt")),
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local".into(),
        format!("--service-account-key-file={}", file("sa.pub")),
        format!("--service-account-signing-key-file={}", file("sa.key")),
        // Room for thousands of Services: every Database has two with a cluster IP.
        "--service-cluster-ip-range=10.0.0.0/16".into(),
        "--authorization-mode=Node,RBAC".into(),
        "--allow-privileged=true".into(),
    ];
    if !full {
        // Without kube-controller-manager no namespace ever gets its `default`
        // ServiceAccount, so Pods would be refused by this one plugin.
        args.push("--disable-admission-plugins=ServiceAccount".into());
    }
    args
}

/// Logs every request at Metadata level: enough to see who used which permission.
const AUDIT_ALL_POLICY: &str = "apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
";

/// Logs every write (and nothing else) at Metadata level: enough to count who wrote what.
const AUDIT_POLICY: &str = "apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  verbs: [create, update, patch, delete, deletecollection]
- level: None
";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attaching_reads_the_server_and_ca_and_refuses_what_needs_the_local_plane() {
        let dir = tempfile::tempdir().expect("temp dir");
        let ca = TestCa::new("their CA").expect("CA");
        let path = dir.path().join("kubeconfig");
        std::fs::write(
            &path,
            kubeconfig::render(
                "https://10.1.2.3:6443",
                ca.cert_pem(),
                "admin",
                &Credentials::Token("t"),
            ),
        )
        .expect("write");
        let plane =
            ControlPlane::attach(path.clone(), &Options::real(&["postgres-17"])).expect("attached");
        assert!(plane.is_attached() && plane.is_real() && plane.is_full());
        assert_eq!(plane.server(), "https://10.1.2.3:6443");
        assert_eq!(plane.ca_pem(), ca.cert_pem());
        assert_eq!(plane.kubeconfig(), path);
        assert!(matches!(
            plane.kubeconfig_for("someone", &[]),
            Err(Error::Unsupported(_))
        ));
        let audited = ControlPlane::attach(path, &Options::default().with_audit());
        assert!(matches!(audited, Err(Error::Unsupported(_))));
    }
}
