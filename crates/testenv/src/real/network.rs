//! The node's Pod network: a bridge with the gateway address, the CNI configuration the
//! runtime reads, and the sysctls routing needs. The node's address is the bridge's
//! gateway, so Pods reach the node's DNS server and the kubelet at a fixed address.

use std::path::Path;

use serde_json::json;

use super::host::{CommandFailed, run, set_sysctl};

/// The bridge every Pod's interface is attached to.
pub const BRIDGE: &str = "dbop0";
/// The Pod network; the node takes its first address.
pub const POD_SUBNET: &str = "10.244.0.0/24";
/// The node's address on the Pod network: the gateway, the kubelet and cluster DNS.
pub const NODE_IP: &str = "10.244.0.1";
/// The CNI network's name.
const NETWORK: &str = "testenv-pods";

/// Creates the bridge with the gateway address and turns on forwarding. Returns the
/// sysctl values to restore.
pub fn create_bridge() -> Result<Vec<(String, String)>, CommandFailed> {
    run("ip", &["link", "add", BRIDGE, "type", "bridge"])?;
    run(
        "ip",
        &["addr", "add", &format!("{NODE_IP}/24"), "dev", BRIDGE],
    )?;
    run("ip", &["link", "set", BRIDGE, "up"])?;
    let mut restore = Vec::new();
    for (name, value) in [
        ("net.ipv4.ip_forward", "1"),
        ("net.bridge.bridge-nf-call-iptables", "1"),
    ] {
        match set_sysctl(name, value) {
            Ok(old) => restore.push((name.to_owned(), old)),
            Err(err) => {
                return Err(CommandFailed {
                    command: format!("sysctl {name}={value}"),
                    message: err.to_string(),
                });
            }
        }
    }
    Ok(restore)
}

/// The CNI configuration list: the bridge with host-local addresses, and portmap.
pub fn cni_config(ipam_dir: &Path) -> serde_json::Value {
    json!({
        "cniVersion": "0.4.0",
        "name": NETWORK,
        "plugins": [
            {
                "type": "bridge",
                "bridge": BRIDGE,
                "isGateway": true,
                // Pods only talk to each other and to the node: no NAT rules per Pod.
                "ipMasq": false,
                "hairpinMode": true,
                "ipam": {
                    "type": "host-local",
                    "dataDir": ipam_dir,
                    "ranges": [[{"subnet": POD_SUBNET, "gateway": NODE_IP, "rangeStart": "10.244.0.10"}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": true}},
        ],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pods_get_addresses_on_the_bridge_with_the_node_as_gateway() {
        let config = cni_config(Path::new("/tmp/ipam"));
        let bridge = &config["plugins"][0];
        assert_eq!(bridge["bridge"], BRIDGE);
        assert_eq!(bridge["ipam"]["ranges"][0][0]["gateway"], NODE_IP);
        assert_eq!(bridge["ipam"]["dataDir"], "/tmp/ipam");
    }
}
