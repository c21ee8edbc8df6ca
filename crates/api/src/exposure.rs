//! How the instances' Pods are labelled and how clients outside the namespace reach
//! the primary.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Labels and annotations added to every instance's Pod, for example for a service
/// mesh, a cost report or a backup agent. The operator's own labels
/// (`app.kubernetes.io/*`, `mycompany.io/*`) cannot be set here.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct PodMetadata {
    /// Labels added to each Pod.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Annotations added to each Pod.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// The client Service: `<name>-rw`, the one the connection Secret names.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ClientService {
    /// `ClusterIP` (the default) reaches the primary from inside the cluster;
    /// `NodePort` and `LoadBalancer` from outside it too.
    #[serde(default, rename = "type")]
    pub type_: ServiceType,
    /// Annotations on the Service, for example a cloud load balancer's settings.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// How the client Service is exposed.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum ServiceType {
    #[default]
    ClusterIP,
    NodePort,
    LoadBalancer,
}

impl ServiceType {
    /// The name Kubernetes gives the type.
    pub fn as_str(self) -> &'static str {
        match self {
            ServiceType::ClusterIP => "ClusterIP",
            ServiceType::NodePort => "NodePort",
            ServiceType::LoadBalancer => "LoadBalancer",
        }
    }
}
