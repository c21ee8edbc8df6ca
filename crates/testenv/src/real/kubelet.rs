//! The kubelet's configuration on the test node.

use std::path::Path;

use super::network::NODE_IP;

/// The node's name.
pub const NODE_NAME: &str = "testenv-node";
/// The kubelet's API port on [`NODE_IP`] (the API server reaches logs and exec there).
pub const KUBELET_PORT: u16 = 10250;

/// KubeletConfiguration for a node on these machines: cgroupfs on cgroup v1, no image
/// garbage collection (the images cannot be pulled again) and eviction only when the
/// host is nearly full, so a busy test machine does not evict the databases. Pods are
/// synced every 10 s rather than every minute, so a changed ConfigMap reaches the Pods
/// that mount it in seconds (the engine-settings tests wait for that).
pub fn config(dir: &Path, containerd_socket: &Path, ca_file: &Path, healthz_port: u16) -> String {
    format!(
        r#"apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: {NODE_IP}
port: {KUBELET_PORT}
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: {healthz_port}
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://{socket}
imageServiceEndpoint: unix://{socket}
podLogsDir: {logs}
clusterDNS: [{NODE_IP}]
clusterDomain: cluster.local
resolvConf: ""
authentication:
  anonymous: {{enabled: false}}
  webhook: {{enabled: false}}
  x509: {{clientCAFile: {ca}}}
authorization: {{mode: AlwaysAllow}}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%
  nodefs.inodesFree: 1%
  imagefs.available: 1%
serializeImagePulls: false
rotateCertificates: false
syncFrequency: 10s
"#,
        socket = containerd_socket.display(),
        logs = dir.join("pod-logs").display(),
        ca = ca_file.display(),
    )
}

/// The kubelet's command line.
pub fn args(dir: &Path, kubeconfig: &Path) -> Vec<String> {
    vec![
        format!("--config={}", dir.join("kubelet.yaml").display()),
        format!("--kubeconfig={}", kubeconfig.display()),
        format!("--root-dir={}", dir.join("root").display()),
        format!("--cert-dir={}", dir.join("pki").display()),
        format!("--hostname-override={NODE_NAME}"),
        format!("--node-ip={NODE_IP}"),
        "--v=1".to_owned(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kubelet_serves_on_the_node_address_and_never_collects_images() {
        let text = config(
            Path::new("/n/kubelet"),
            Path::new("/n/containerd.sock"),
            Path::new("/n/ca.crt"),
            4000,
        );
        assert!(text.contains(&format!("address: {NODE_IP}")), "{text}");
        assert!(text.contains("imageGCHighThresholdPercent: 100"), "{text}");
        assert!(text.contains("failCgroupV1: false"), "{text}");
        assert!(text.contains("unix:///n/containerd.sock"), "{text}");
    }
}
