//! Command-line options of the `controller` binary. Every flag can also be set through
//! the environment variable named beside it; flag names follow kubebuilder's.

use std::net::SocketAddr;
use std::path::PathBuf;

use operator_runtime::telemetry::LogFormat;

#[derive(clap::Parser, Clone, Debug)]
#[command(
    name = "controller",
    about = "Runs Database objects as StatefulSets",
    version
)]
pub struct Cli {
    /// Kubeconfig to use; without it the in-cluster service account (or the usual
    /// KUBECONFIG / ~/.kube/config lookup) is used.
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,

    /// Namespaces to watch, comma separated; all namespaces when empty.
    #[arg(long, env = "WATCH_NAMESPACES", value_delimiter = ',')]
    pub namespaces: Vec<String>,

    /// Hold a Lease so only one replica reconciles.
    #[arg(long, env = "LEADER_ELECT")]
    pub leader_elect: bool,

    /// Namespace of the leader-election Lease.
    #[arg(
        long,
        env = "POD_NAMESPACE",
        default_value = "database-operator-system"
    )]
    pub leader_election_namespace: String,

    /// Name of the leader-election Lease.
    #[arg(
        long,
        env = "LEADER_ELECTION_ID",
        default_value = "database-operator-leader"
    )]
    pub leader_election_id: String,

    /// This replica's identity in the Lease (the Pod name in a cluster).
    #[arg(long, env = "POD_NAME")]
    pub identity: Option<String>,

    /// Seconds a standby waits without seeing a renewal before taking over.
    #[arg(long, env = "LEASE_DURATION_SECONDS", default_value_t = 15)]
    pub lease_duration_seconds: u64,

    /// Seconds the leader keeps trying to renew before it stops leading.
    #[arg(long, env = "RENEW_DEADLINE_SECONDS", default_value_t = 10)]
    pub renew_deadline_seconds: u64,

    /// Seconds between Lease attempts.
    #[arg(long, env = "RETRY_PERIOD_SECONDS", default_value_t = 2)]
    pub retry_period_seconds: u64,

    /// Where `/metrics` is served (Prometheus text).
    #[arg(long, env = "METRICS_BIND_ADDRESS", default_value = "0.0.0.0:8080")]
    pub metrics_bind_address: SocketAddr,

    /// Serve `/metrics` over HTTPS, only to callers the API server authenticates
    /// (TokenReview) and authorises for `get` on `/metrics` (SubjectAccessReview).
    #[arg(long, env = "METRICS_SECURE")]
    pub metrics_secure: bool,

    /// With --metrics-secure: the folder holding `tls.crt` and `tls.key` (reloaded when
    /// they change); a self-signed certificate when absent.
    #[arg(long, env = "METRICS_CERT_DIR")]
    pub metrics_cert_dir: Option<std::path::PathBuf>,

    /// Where `/healthz` and `/readyz` are served.
    #[arg(
        long,
        env = "HEALTH_PROBE_BIND_ADDRESS",
        default_value = "0.0.0.0:8081"
    )]
    pub health_probe_bind_address: SocketAddr,

    /// Log format.
    #[arg(long, env = "LOG_FORMAT", value_enum, default_value = "json")]
    pub log_format: LogFormat,

    /// Sustained requests per second to the API server.
    #[arg(long, env = "KUBE_API_QPS", default_value_t = 100.0)]
    pub kube_api_qps: f64,

    /// Requests allowed above the sustained rate in a burst.
    #[arg(long, env = "KUBE_API_BURST", default_value_t = 200)]
    pub kube_api_burst: u32,

    /// Databases reconciled at the same time.
    #[arg(long, env = "MAX_CONCURRENT_RECONCILES", default_value_t = 16)]
    pub max_concurrent_reconciles: u16,

    /// Registry (and path) to pull engine images from instead of Docker Hub, e.g.
    /// `registry.example.com/library`.
    #[arg(long, env = "IMAGE_REGISTRY")]
    pub image_registry: Option<String>,

    /// The cluster's DNS domain, for the host names in connection Secrets and status.
    #[arg(long, env = "CLUSTER_DOMAIN", default_value = crate::resources::DEFAULT_CLUSTER_DOMAIN)]
    pub cluster_domain: String,

    /// Largest `spec.storage` accepted, in GiB.
    #[arg(long, env = "MAX_STORAGE_GI", default_value_t = 16384)]
    pub max_storage_gi: u64,

    /// The image backup and restore Jobs run the backup agent from. By default the
    /// controller's own image, read from its Pod (`POD_NAME`, `POD_NAMESPACE`).
    #[arg(long, env = "BACKUP_AGENT_IMAGE")]
    pub backup_agent_image: Option<String>,
}
