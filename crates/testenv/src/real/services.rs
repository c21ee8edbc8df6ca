//! Service routing and names on the test node: kube-proxy in iptables mode, and CoreDNS
//! on the node's address serving `cluster.local` from the API server.

use std::path::Path;

use super::kubelet::NODE_NAME;
use super::network::{NODE_IP, POD_SUBNET};

/// KubeProxyConfiguration: iptables mode, leaving the host's conntrack limits and
/// `route_localnet` alone.
pub fn kube_proxy_config(kubeconfig: &Path, metrics_port: u16, healthz_port: u16) -> String {
    format!(
        r"apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clusterCIDR: {POD_SUBNET}
hostnameOverride: {NODE_NAME}
bindAddress: {NODE_IP}
metricsBindAddress: 127.0.0.1:{metrics_port}
healthzBindAddress: 127.0.0.1:{healthz_port}
clientConnection:
  kubeconfig: {kubeconfig}
conntrack:
  maxPerCore: 0
iptables:
  localhostNodePorts: false
",
        kubeconfig = kubeconfig.display(),
    )
}

/// The Corefile: `cluster.local` (Services, Pods and `<pod>.<service>` names) on the
/// node's address, as a cluster's kube-dns Service would answer.
pub fn corefile(kubeconfig: &Path, health_port: u16) -> String {
    format!(
        r"cluster.local:53 in-addr.arpa:53 ip6.arpa:53 {{
    bind {NODE_IP}
    errors
    health 127.0.0.1:{health_port}
    kubernetes cluster.local in-addr.arpa ip6.arpa {{
        kubeconfig {kubeconfig}
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }}
    cache 5
}}
",
        kubeconfig = kubeconfig.display(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_serves_the_cluster_domain_on_the_node_address() {
        let text = corefile(Path::new("/n/dns.kubeconfig"), 5000);
        assert!(text.contains(&format!("bind {NODE_IP}")), "{text}");
        assert!(text.contains("kubeconfig /n/dns.kubeconfig"), "{text}");
        assert!(text.contains("health 127.0.0.1:5000"), "{text}");
    }

    #[test]
    fn kube_proxy_uses_iptables_and_leaves_conntrack_alone() {
        let text = kube_proxy_config(Path::new("/n/proxy.kubeconfig"), 1, 2);
        assert!(text.contains("mode: iptables"), "{text}");
        assert!(text.contains("maxPerCore: 0"), "{text}");
    }
}
