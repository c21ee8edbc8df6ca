//! The Services: the headless one that gives each instance a stable DNS name, `-rw`
//! that reaches the primary, and `-ro` that reaches the replicas.

use database_api::Database;
use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::ResourceExt;

use super::meta::{
    PRIMARY, REPLICA, ROLE_LABEL, object_meta, ro_service_name, rw_service_name, selector_labels,
};
use crate::engine::profile;

pub fn build_service(db: &Database) -> Service {
    Service {
        metadata: object_meta(db, db.name_any()),
        spec: Some(ServiceSpec {
            cluster_ip: Some("None".to_owned()),
            // Peers must find each other before they are ready (replication, init).
            publish_not_ready_addresses: Some(true),
            selector: Some(selector_labels(db)),
            ports: Some(ports(db)),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}

/// The Service of one role: `-rw` for the primary, `-ro` for the replicas. Only ready
/// instances that carry the role label the controller sets are selected.
pub fn build_role_service(db: &Database, role: &str) -> Service {
    let name = if role == PRIMARY {
        rw_service_name(db)
    } else {
        ro_service_name(db)
    };
    let mut selector = selector_labels(db);
    selector.insert(ROLE_LABEL.to_owned(), role.to_owned());
    let client = db.spec.service.clone().filter(|_| role == PRIMARY);
    let mut metadata = object_meta(db, name);
    if let Some(client) = &client {
        metadata.annotations = (!client.annotations.is_empty()).then(|| client.annotations.clone());
    }
    Service {
        metadata,
        spec: Some(ServiceSpec {
            type_: client.map(|c| c.type_.as_str().to_owned()),
            selector: Some(selector),
            ports: Some(ports(db)),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}

/// The `-rw` Service: the primary behind a virtual IP, or, while the Database has one
/// instance and asks for no particular client Service, a DNS alias of the primary's
/// name under the headless Service. An alias takes no cluster IP and no endpoints: the
/// API server's cost of allocating an IP grows with the cluster IPs already taken, and
/// with one instance there is no failover for a virtual IP to hide.
pub fn build_write_service(db: &Database, primary: &str, cluster_domain: &str) -> Service {
    if db.spec.replicas > 1 || db.spec.service.is_some() {
        return build_role_service(db, PRIMARY);
    }
    let namespace = db.namespace().unwrap_or_default();
    let headless = db.name_any();
    alias(
        db,
        rw_service_name(db),
        format!("{primary}.{headless}.{namespace}.svc.{cluster_domain}"),
    )
}

/// `desired`, the `-rw` [`build_write_service`] wants, unless it is an alias and
/// `current` already has a virtual IP: that stays. A client that resolved the name just
/// before a change to an alias would be left with an address nothing answers any more,
/// and would wait for its connect to time out; an alias changed into a virtual IP leaves
/// it the primary's own address, which still answers.
pub fn keeping_a_virtual_ip(db: &Database, desired: Service, current: Option<&Service>) -> Service {
    if is_alias(&desired) && current.is_some_and(|c| !is_alias(c)) {
        build_role_service(db, PRIMARY)
    } else {
        desired
    }
}

/// Whether `service` is a DNS alias (`ExternalName`), with no virtual IP.
pub fn is_alias(service: &Service) -> bool {
    service.spec.as_ref().and_then(|s| s.type_.as_deref()) == Some("ExternalName")
}

/// The `-ro` Service: the replicas behind a virtual IP, or, while the Database has one
/// instance and so no replica, a DNS alias of `-rw`: reads through `-ro` then reach the
/// primary rather than nothing, and no cluster IP is taken.
pub fn build_read_service(db: &Database, cluster_domain: &str) -> Service {
    if db.spec.replicas > 1 {
        return build_role_service(db, REPLICA);
    }
    let namespace = db.namespace().unwrap_or_default();
    alias(
        db,
        ro_service_name(db),
        format!("{}.{namespace}.svc.{cluster_domain}", rw_service_name(db)),
    )
}

/// An `ExternalName` Service named `name` that answers with `target`. It keeps the
/// primary's selector, which nothing routes by but which `kubectl port-forward
/// service/<name>` needs to find the Pod.
fn alias(db: &Database, name: String, target: String) -> Service {
    let mut selector = selector_labels(db);
    selector.insert(ROLE_LABEL.to_owned(), PRIMARY.to_owned());
    Service {
        metadata: object_meta(db, name),
        spec: Some(ServiceSpec {
            type_: Some("ExternalName".to_owned()),
            external_name: Some(target),
            selector: Some(selector),
            ports: Some(ports(db)),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}

fn ports(db: &Database) -> Vec<ServicePort> {
    let engine = profile(db.spec.engine);
    vec![ServicePort {
        name: Some(engine.port_name.to_owned()),
        port: engine.port,
        target_port: Some(IntOrString::String(engine.port_name.to_owned())),
        protocol: Some("TCP".to_owned()),
        ..ServicePort::default()
    }]
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

    #[test]
    fn the_role_services_select_ready_instances_of_one_role() {
        let db = database(Engine::Postgres, "17", 3);
        for (role, name) in [(PRIMARY, "orders-rw"), (REPLICA, "orders-ro")] {
            let service = build_role_service(&db, role);
            assert_eq!(service.metadata.name.as_deref(), Some(name));
            let spec = service.spec.expect("spec");
            assert_eq!(spec.cluster_ip, None, "a virtual IP, not headless");
            assert_eq!(
                spec.publish_not_ready_addresses, None,
                "ready instances only"
            );
            let selector = spec.selector.expect("selector");
            assert_eq!(selector[ROLE_LABEL], role);
            assert_eq!(selector["app.kubernetes.io/instance"], "orders");
        }
    }

    #[test]
    fn one_instance_reads_through_an_alias_of_rw_and_more_through_the_replicas() {
        let single = build_read_service(&database(Engine::Postgres, "17", 1), "cluster.local");
        assert_eq!(single.metadata.name.as_deref(), Some("orders-ro"));
        let spec = single.spec.expect("spec");
        assert_eq!(spec.type_.as_deref(), Some("ExternalName"));
        assert_eq!(
            spec.external_name.as_deref(),
            Some("orders-rw.shop.svc.cluster.local")
        );
        assert_eq!(spec.cluster_ip, None);
        assert_eq!(
            spec.selector.expect("selector")[ROLE_LABEL],
            PRIMARY,
            "port-forward finds the instance the alias answers with"
        );
        let three = build_read_service(&database(Engine::Postgres, "17", 3), "cluster.local");
        assert_eq!(
            three,
            build_role_service(&database(Engine::Postgres, "17", 3), REPLICA)
        );
    }

    #[test]
    fn one_instance_writes_through_an_alias_of_the_primarys_name() {
        let single = database(Engine::Postgres, "17", 1);
        let rw = build_write_service(&single, "orders-0", "cluster.local");
        assert_eq!(rw.metadata.name.as_deref(), Some("orders-rw"));
        let spec = rw.spec.expect("spec");
        assert_eq!(spec.type_.as_deref(), Some("ExternalName"));
        assert_eq!(
            spec.external_name.as_deref(),
            Some("orders-0.orders.shop.svc.cluster.local")
        );
        assert_eq!(spec.selector.expect("selector")[ROLE_LABEL], PRIMARY);
        let port = &spec.ports.expect("ports")[0];
        assert_eq!((port.name.as_deref(), port.port), (Some("postgres"), 5432));
        // Mid scale-down the alias names the primary wherever it still is.
        let moving = build_write_service(&single, "orders-2", "example.org");
        assert_eq!(
            moving.spec.and_then(|s| s.external_name).as_deref(),
            Some("orders-2.orders.shop.svc.example.org")
        );
    }

    #[test]
    fn a_rw_with_a_virtual_ip_keeps_it_at_one_instance() {
        let single = database(Engine::Postgres, "17", 1);
        let alias = build_write_service(&single, "orders-0", "cluster.local");
        let virtual_ip = build_role_service(&single, PRIMARY);
        assert_eq!(
            keeping_a_virtual_ip(&single, alias.clone(), Some(&virtual_ip)),
            virtual_ip
        );
        assert_eq!(
            keeping_a_virtual_ip(&single, alias.clone(), Some(&alias)),
            alias
        );
        assert_eq!(keeping_a_virtual_ip(&single, alias.clone(), None), alias);
        let three = database(Engine::Postgres, "17", 3);
        let wanted = build_write_service(&three, "orders-0", "cluster.local");
        assert_eq!(
            keeping_a_virtual_ip(&three, wanted.clone(), Some(&alias)),
            wanted,
            "an alias becomes a virtual IP"
        );
    }

    #[test]
    fn more_instances_or_a_client_service_keep_a_virtual_ip_for_rw() {
        let three = database(Engine::Postgres, "17", 3);
        assert_eq!(
            build_write_service(&three, "orders-1", "cluster.local"),
            build_role_service(&three, PRIMARY)
        );
        let mut asked = database(Engine::Postgres, "17", 1);
        asked.spec.service = Some(database_api::exposure::ClientService::default());
        let rw = build_write_service(&asked, "orders-0", "cluster.local");
        assert_eq!(rw, build_role_service(&asked, PRIMARY));
        assert_eq!(rw.spec.and_then(|s| s.type_).as_deref(), Some("ClusterIP"));
    }

    #[test]
    fn the_client_service_takes_the_type_and_annotations_the_replicas_one_does_not() {
        let mut db = database(Engine::Postgres, "17", 3);
        db.spec.service = Some(database_api::exposure::ClientService {
            type_: database_api::exposure::ServiceType::LoadBalancer,
            annotations: [("example.com/lb".to_owned(), "internal".to_owned())].into(),
        });
        let rw = build_role_service(&db, PRIMARY);
        assert_eq!(
            rw.spec.expect("spec").type_.as_deref(),
            Some("LoadBalancer")
        );
        assert_eq!(
            rw.metadata.annotations.expect("annotations")["example.com/lb"],
            "internal"
        );
        let ro = build_role_service(&db, REPLICA);
        assert_eq!(ro.spec.expect("spec").type_, None);
        assert_eq!(ro.metadata.annotations, None);
    }
}
