//! Database metrics: the community exporter each engine's Pods run beside the server
//! when `spec.monitoring.enabled` is set.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::Engine;

/// An exporter sidecar in each instance's Pod, serving the engine's metrics in the
/// Prometheus text format on the container port named `metrics`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Monitoring {
    /// Run the exporter. It logs in as its own user, `monitor`, which may read the
    /// server's statistics and nothing else.
    #[serde(default)]
    pub enabled: bool,
    /// The exporter's image, for a mirror of the default one; the community exporter
    /// for the engine when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
}

/// The exporter an engine's Pods run: its image and the port it serves on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Exporter {
    pub image: &'static str,
    pub port: i32,
}

/// The community exporter for `engine`, at the version the operator is tested with.
pub fn exporter(engine: Engine) -> Exporter {
    match engine {
        Engine::Postgres => Exporter {
            image: "quay.io/prometheuscommunity/postgres-exporter:v0.17.1",
            port: 9187,
        },
        Engine::Mysql => Exporter {
            image: "quay.io/prometheus/mysqld-exporter:v0.17.2",
            port: 9104,
        },
        Engine::Mongodb => Exporter {
            image: "docker.io/percona/mongodb_exporter:0.47.1",
            port: 9216,
        },
    }
}

impl Monitoring {
    /// The image the exporter runs for `engine`.
    pub fn image_for(&self, engine: Engine) -> String {
        self.image
            .clone()
            .unwrap_or_else(|| exporter(engine).image.to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_engine_has_its_own_exporter_port() {
        let ports: std::collections::BTreeSet<i32> =
            Engine::ALL.iter().map(|e| exporter(*e).port).collect();
        assert_eq!(ports.len(), Engine::ALL.len());
    }

    #[test]
    fn a_mirror_image_replaces_the_default() {
        let mirrored = Monitoring {
            enabled: true,
            image: Some("registry.example/postgres-exporter:v0.17.1".to_owned()),
        };
        assert_eq!(
            mirrored.image_for(Engine::Postgres),
            "registry.example/postgres-exporter:v0.17.1"
        );
        assert_eq!(
            Monitoring::default().image_for(Engine::Mysql),
            "quay.io/prometheus/mysqld-exporter:v0.17.2"
        );
    }
}
