//! A real Prometheus for the monitoring tests: Debian's `prometheus` package, scraping
//! the Databases' exporters and answering PromQL over its HTTP API.
//!
//! Debian builds Prometheus without its Kubernetes discovery, so [`scrape_targets`]
//! does what the monitoring component's PodMonitor asks of it: it lists the Database
//! Pods by the operator's labels, takes each container port named `metrics`, and labels
//! the target with its namespace, Pod, Database and engine. The targets reach the
//! server through file discovery.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use std::time::{Duration, Instant};

use http_body_util::{BodyExt as _, Empty};
use hyper::body::Bytes;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use serde_json::{Value, json};
use tempfile::TempDir;

use crate::free_port;
use crate::process::Process;

/// Where Debian's package installs the server.
const BINARY: &str = "/usr/bin/prometheus";
/// How long the server may take to answer.
const READY_WITHIN: Duration = Duration::from_secs(30);
/// The file the targets are discovered from.
const TARGETS_FILE: &str = "targets.json";

/// Scrapes every 2 s so tests wait little.
const CONFIG: &str = r"global:
  scrape_interval: 2s
  evaluation_interval: 2s
scrape_configs:
- job_name: database-exporter
  file_sd_configs:
  - files: [TARGETS]
    refresh_interval: 2s
";

/// One scrape target: `host:port` and the labels its samples carry.
#[derive(Clone, Debug, PartialEq)]
pub struct Target {
    pub address: String,
    pub labels: Vec<(String, String)>,
}

/// The Database Pods' exporters in `namespace`, labelled as the PodMonitor labels them
/// (`namespace`, `pod`, `database`, `engine`). Pods without an IP yet are left out.
pub async fn scrape_targets(client: &kube::Client, namespace: &str) -> Result<Vec<Target>, Error> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let selector =
        "app.kubernetes.io/managed-by=database-operator,app.kubernetes.io/component=database";
    let list = pods
        .list(&ListParams::default().labels(selector))
        .await
        .map_err(|e| Error::Answer(format!("listing the Database Pods: {e}")))?;
    Ok(list.items.iter().flat_map(targets_of).collect())
}

fn targets_of(pod: &Pod) -> Vec<Target> {
    let Some(ip) = pod.status.as_ref().and_then(|s| s.pod_ip.clone()) else {
        return Vec::new();
    };
    let meta = &pod.metadata;
    let label = |key: &str| {
        meta.labels
            .as_ref()
            .and_then(|l| l.get(key))
            .cloned()
            .unwrap_or_default()
    };
    let labels = vec![
        (
            "namespace".to_owned(),
            meta.namespace.clone().unwrap_or_default(),
        ),
        ("pod".to_owned(), meta.name.clone().unwrap_or_default()),
        ("database".to_owned(), label("app.kubernetes.io/instance")),
        ("engine".to_owned(), label("app.kubernetes.io/name")),
    ];
    pod.spec
        .iter()
        .flat_map(|s| &s.containers)
        .flat_map(|c| c.ports.iter().flatten())
        .filter(|p| p.name.as_deref() == Some("metrics"))
        .map(|p| Target {
            address: format!("{ip}:{}", p.container_port),
            labels: labels.clone(),
        })
        .collect()
}

/// Why the server did not start or answer.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("starting prometheus (apt-get install prometheus): {0}")]
    Io(#[from] std::io::Error),
    #[error("prometheus exited with {status} while starting; last log lines:\n{log}")]
    Exited { status: String, log: String },
    #[error("{0}")]
    Answer(String),
    #[error("reading prometheus's answer: {0}")]
    Json(#[from] serde_json::Error),
}

/// A running Prometheus; dropping it stops the server and deletes its data.
pub struct Prometheus {
    process: Process,
    dir: TempDir,
    port: u16,
}

/// One sample of a query's answer: its labels and value.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    pub labels: serde_json::Map<String, Value>,
    pub value: f64,
}

impl Prometheus {
    /// Whether the server is installed (`apt-get install prometheus`).
    pub fn installed() -> bool {
        Path::new(BINARY).is_file()
    }

    /// Starts the server on the loopback, with no targets yet.
    pub async fn start() -> Result<Self, Error> {
        let dir = tempfile::Builder::new()
            .prefix("testenv-prometheus-")
            .tempdir()?;
        let config = dir.path().join("prometheus.yml");
        let targets = dir.path().join(TARGETS_FILE);
        std::fs::write(&targets, "[]")?;
        std::fs::write(
            &config,
            CONFIG.replace("TARGETS", &targets.display().to_string()),
        )?;
        let port = free_port()?;
        let args = vec![
            format!("--config.file={}", config.display()),
            format!("--storage.tsdb.path={}", dir.path().join("data").display()),
            format!("--web.listen-address=127.0.0.1:{port}"),
            "--log.level=warn".to_owned(),
        ];
        let mut process = Process::spawn("prometheus", &PathBuf::from(BINARY), &args, dir.path())?;
        let started = Instant::now();
        let prometheus = loop {
            if let Some(status) = process.exited() {
                return Err(Error::Exited {
                    status: status.to_string(),
                    log: process.log_tail(20),
                });
            }
            if get(port, "/-/ready")
                .await
                .is_ok_and(|(code, _)| code == 200)
            {
                break Self { process, dir, port };
            }
            if started.elapsed() > READY_WITHIN {
                return Err(Error::Answer(format!(
                    "prometheus did not become ready within {READY_WITHIN:?}: {}",
                    process.log_tail(20)
                )));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        Ok(prometheus)
    }

    /// Scrapes `targets` from now on, in place of the ones before.
    pub fn set_targets(&self, targets: &[Target]) -> Result<(), Error> {
        let groups: Vec<Value> = targets
            .iter()
            .map(|t| {
                let labels: serde_json::Map<String, Value> = t
                    .labels
                    .iter()
                    .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                    .collect();
                json!({"targets": [t.address], "labels": labels})
            })
            .collect();
        // Written whole and renamed, so the server never reads half a file.
        let partial = self.dir.path().join("targets.json.new");
        std::fs::write(&partial, serde_json::to_vec(&groups)?)?;
        std::fs::rename(&partial, self.dir.path().join(TARGETS_FILE))?;
        Ok(())
    }

    /// The instant answer to `promql`.
    pub async fn query(&self, promql: &str) -> Result<Vec<Sample>, Error> {
        let path = format!("/api/v1/query?query={}", encode(promql));
        let (code, body) = get(self.port, &path).await?;
        let answer: Value = serde_json::from_slice(&body)?;
        if code != 200 || answer["status"] != "success" {
            return Err(Error::Answer(format!(
                "prometheus refused {promql:?} ({code}): {answer}"
            )));
        }
        Ok(answer["data"]["result"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| {
                let labels = r["metric"].as_object()?.clone();
                let value = r["value"][1].as_str()?.parse().ok()?;
                Some(Sample { labels, value })
            })
            .collect())
    }

    /// Waits until `promql` has an answer, and returns it; on timeout, the error says
    /// what the scrape targets looked like.
    pub async fn wait_for(&self, promql: &str, within: Duration) -> Result<Vec<Sample>, Error> {
        let started = Instant::now();
        loop {
            let samples = self.query(promql).await?;
            if !samples.is_empty() {
                return Ok(samples);
            }
            if started.elapsed() > within {
                let targets = get(self.port, "/api/v1/targets")
                    .await
                    .map(|(_, body)| String::from_utf8_lossy(&body).into_owned())
                    .unwrap_or_default();
                return Err(Error::Answer(format!(
                    "no answer to {promql:?} within {within:?}; targets: {targets}"
                )));
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }

    /// Whether the server still runs.
    pub fn running(&mut self) -> bool {
        self.process.exited().is_none()
    }
}

/// Percent-encodes a query parameter's value.
fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len() * 3);
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(byte));
        } else {
            let _ = write!(out, "%{byte:02X}");
        }
    }
    out
}

/// A plain HTTP GET on the loopback: the status code and the body.
async fn get(port: u16, path: &str) -> Result<(u16, Bytes), Error> {
    let io_error = |e: &dyn std::fmt::Display| Error::Answer(format!("GET {path}: {e}"));
    let stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .map_err(|e| io_error(&e))?;
    tokio::spawn(connection);
    let request = http::Request::get(path)
        .header("host", format!("127.0.0.1:{port}"))
        .body(Empty::<Bytes>::new())
        .map_err(|e| io_error(&e))?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| io_error(&e))?;
    let code = response.status().as_u16();
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|e| io_error(&e))?
        .to_bytes();
    Ok((code, body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_are_percent_encoded() {
        assert_eq!(
            encode(r#"pg_up{database="orders"} == 1"#),
            "pg_up%7Bdatabase%3D%22orders%22%7D%20%3D%3D%201"
        );
    }
}
