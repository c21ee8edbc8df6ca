//! The headless Service that gives each instance a stable DNS name.

use database_api::Database;
use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::ResourceExt;

use super::meta::{object_meta, selector_labels};
use crate::engine::profile;

pub fn build_service(db: &Database) -> Service {
    let engine = profile(db.spec.engine);
    Service {
        metadata: object_meta(db, db.name_any()),
        spec: Some(ServiceSpec {
            cluster_ip: Some("None".to_owned()),
            // Peers must find each other before they are ready (replication, init).
            publish_not_ready_addresses: Some(true),
            selector: Some(selector_labels(db)),
            ports: Some(vec![ServicePort {
                name: Some(engine.port_name.to_owned()),
                port: engine.port,
                target_port: Some(IntOrString::String(engine.port_name.to_owned())),
                protocol: Some("TCP".to_owned()),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::fixtures::database;
    use database_api::Engine;

    #[test]
    fn service_is_headless_publishes_unready_pods_and_exposes_the_engine_port() {
        let service = build_service(&database(Engine::Mongodb, "7.0", 1));
        let spec = service.spec.expect("spec");
        assert_eq!(spec.cluster_ip.as_deref(), Some("None"));
        assert_eq!(spec.publish_not_ready_addresses, Some(true));
        let port = &spec.ports.expect("ports")[0];
        assert_eq!((port.name.as_deref(), port.port), (Some("mongodb"), 27017));
        assert_eq!(
            spec.selector.expect("selector")["app.kubernetes.io/instance"],
            "orders"
        );
    }
}
