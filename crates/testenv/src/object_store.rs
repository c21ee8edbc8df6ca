//! A real S3-compatible object store for backup tests: versitygw over TLS, serving the
//! buckets of a temporary directory (a bucket is a folder, an object a file in it).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use tempfile::TempDir;

use crate::error::Error;
use crate::pki::TestCa;
use crate::process::Process;
use crate::{assets, free_port};

/// The address Pods on the real node reach the host at.
pub const NODE_ADDRESS: &str = crate::real::NODE_IP;
/// How long the store may take to listen.
const READY_WITHIN: Duration = Duration::from_secs(30);

/// A running store; dropping it stops the server and deletes every object.
pub struct ObjectStore {
    process: Process,
    dir: TempDir,
    /// `https://<ip>:<port>`.
    pub endpoint: String,
    /// The CA the store's certificate is issued by, PEM.
    pub ca_pem: String,
    pub access_key_id: String,
    pub secret_access_key: String,
}

impl ObjectStore {
    /// Starts the store on `ip` (`127.0.0.1`, or [`NODE_ADDRESS`] for Pods), with a
    /// certificate of its own CA and fresh credentials.
    pub async fn start(ip: &str) -> Result<Self, Error> {
        let binary = assets::find("versitygw")?;
        let dir = tempfile::Builder::new().prefix("testenv-s3-").tempdir()?;
        let data = dir.path().join("data");
        std::fs::create_dir_all(&data)?;
        let ca = TestCa::new("testenv object store CA")?;
        let serving = ca.issue_server(&[ip, "127.0.0.1", "localhost"])?;
        let cert = dir.path().join("tls.crt");
        let key = dir.path().join("tls.key");
        std::fs::write(&cert, &serving.cert_pem)?;
        std::fs::write(&key, &serving.key_pem)?;
        let port = free_port()?;
        let access_key_id = format!("testenv{}", random_hex(6)?);
        let secret_access_key = random_hex(20)?;
        let args = vec![
            "--access".to_owned(),
            access_key_id.clone(),
            "--secret".to_owned(),
            secret_access_key.clone(),
            "--port".to_owned(),
            format!("{ip}:{port}"),
            "--cert".to_owned(),
            cert.display().to_string(),
            "--key".to_owned(),
            key.display().to_string(),
            "--quiet".to_owned(),
            "posix".to_owned(),
            data.display().to_string(),
        ];
        let mut process = Process::spawn("versitygw", &binary, &args, dir.path())?;
        wait_listening(&mut process, ip, port).await?;
        Ok(Self {
            process,
            dir,
            endpoint: format!("https://{ip}:{port}"),
            ca_pem: ca.cert_pem().to_owned(),
            access_key_id,
            secret_access_key,
        })
    }

    /// The file holding `key` in `bucket`, to look at what the store keeps.
    pub fn object_path(&self, bucket: &str, key: &str) -> PathBuf {
        self.data().join(bucket).join(key)
    }

    /// The Secrets a destination on this store names: `backup-keys` (its keys, under
    /// `access-key-id` and `secret-access-key`) and `store-ca` (its CA, `ca.crt`).
    pub fn secrets(&self, namespace: &str) -> Vec<Secret> {
        let secret = |name: &str, data: BTreeMap<String, String>| Secret {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some(namespace.to_owned()),
                ..ObjectMeta::default()
            },
            string_data: Some(data),
            ..Secret::default()
        };
        vec![
            secret(
                "backup-keys",
                BTreeMap::from([
                    ("access-key-id".to_owned(), self.access_key_id.clone()),
                    (
                        "secret-access-key".to_owned(),
                        self.secret_access_key.clone(),
                    ),
                ]),
            ),
            secret(
                "store-ca",
                BTreeMap::from([("ca.crt".to_owned(), self.ca_pem.clone())]),
            ),
        ]
    }

    /// An S3 destination on `bucket` of this store, with [`Self::secrets`].
    pub fn destination(&self, bucket: &str, prefix: &str) -> serde_json::Value {
        serde_json::json!({"s3": {
            "endpoint": self.endpoint, "bucket": bucket, "prefix": prefix,
            "credentialsSecret": "backup-keys", "ca": {"name": "store-ca", "key": "ca.crt"},
        }})
    }

    /// The keys in `bucket`, sorted.
    pub fn keys(&self, bucket: &str) -> Vec<String> {
        let root = self.data().join(bucket);
        let mut keys = Vec::new();
        collect_files(&root, &root, &mut keys);
        keys.sort();
        keys
    }

    /// Whether the server still runs.
    pub fn running(&mut self) -> bool {
        self.process.exited().is_none()
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }
}

impl Drop for ObjectStore {
    fn drop(&mut self) {
        self.process.stop();
    }
}

/// Waits until the store listens on `ip:port`; fails with its log when it exits first
/// or does not listen within [`READY_WITHIN`].
async fn wait_listening(process: &mut Process, ip: &str, port: u16) -> Result<(), Error> {
    let started = Instant::now();
    loop {
        if let Some(status) = process.exited() {
            return Err(Error::Exited {
                component: "versitygw".into(),
                status: status.to_string(),
                log: process.log_tail(20),
            });
        }
        if tokio::net::TcpStream::connect((ip, port)).await.is_ok() {
            return Ok(());
        }
        if started.elapsed() > READY_WITHIN {
            return Err(Error::NotReady {
                what: "versitygw".into(),
                timeout: READY_WITHIN,
                log: process.log_tail(20),
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Files under `dir`, as paths relative to `root`; the store's own hidden folders
/// (multipart uploads in progress) are not objects.
fn collect_files(root: &Path, dir: &Path, out: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        if path.is_dir() {
            collect_files(root, &path, out);
        } else if let Ok(relative) = path.strip_prefix(root) {
            out.push(relative.display().to_string());
        }
    }
}

fn random_hex(bytes: usize) -> std::io::Result<String> {
    use std::io::Read;
    let mut buffer = vec![0u8; bytes];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut buffer)?;
    Ok(buffer.iter().fold(String::new(), |mut out, b| {
        let _ = write!(out, "{b:02x}");
        out
    }))
}
