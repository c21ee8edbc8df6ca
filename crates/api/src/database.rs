//! The `Database` resource: spec, status and the CRD metadata derived from them.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, ResourceRequirements, Toleration, TopologySpreadConstraint,
};

use crate::backup::{BackupSchedule, BackupsStatus, RestoreSource};
use crate::exposure::{ClientService, PodMetadata};
use crate::monitoring::Monitoring;
use crate::replication::{InstanceStatus, Replication};

/// Replicas when the user gives none; the CRD schema carries it so the API server applies it.
pub const DEFAULT_REPLICAS: i32 = 1;
/// Fewest replicas a Database may ask for.
pub const MIN_REPLICAS: i32 = 1;
/// Most replicas a Database may ask for.
pub const MAX_REPLICAS: i32 = 5;

/// The desired state of a database: which engine, which version, how much storage and
/// how many instances.
// Several printcolumns share `type_ = ...`, which clippy mistakes for a repeated attribute.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "mycompany.io",
    version = "v1",
    kind = "Database",
    plural = "databases",
    singular = "database",
    shortname = "db",
    category = "all",
    category = "mycompany",
    namespaced,
    status = "DatabaseStatus",
    derive = "PartialEq",
    doc = "A database run by the operator as a StatefulSet with persistent storage and a headless Service.",
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.replicas",
        label_selector_path = ".status.selector"
    ),
    printcolumn(name = "Engine", type_ = "string", json_path = ".spec.engine"),
    printcolumn(name = "Version", type_ = "string", json_path = ".spec.version"),
    printcolumn(
        name = "Replicas",
        type_ = "integer",
        json_path = ".spec.replicas",
        description = "Desired instances"
    ),
    printcolumn(
        name = "Ready",
        type_ = "integer",
        json_path = ".status.replicas",
        description = "Ready instances"
    ),
    printcolumn(name = "Status", type_ = "string", json_path = ".status.phase"),
    printcolumn(
        name = "Primary",
        type_ = "string",
        json_path = ".status.primary",
        priority = 1
    ),
    printcolumn(
        name = "Endpoint",
        type_ = "string",
        json_path = ".status.endpoint",
        priority = 1
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    selectable = ".spec.engine"
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "has(self.restoreFrom) == has(oldSelf.restoreFrom)",
        "message": "restoreFrom is given only when a Database is created",
    },
    {
        "rule": "has(self.storageClassName) == has(oldSelf.storageClassName) && (!has(self.storageClassName) || self.storageClassName == oldSelf.storageClassName)",
        "message": "storageClassName is immutable: a StatefulSet's volumes keep the class they were created with",
    },
]))]
pub struct DatabaseSpec {
    /// Database engine. Immutable once created.
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "self == oldSelf", "message": "engine is immutable"}]))]
    pub engine: Engine,

    /// Engine version, for example "16.4" for postgres, "8.4" for mysql, "7.0" for mongodb.
    #[schemars(length(min = 1, max = 32))]
    pub version: String,

    /// Size of each instance's persistent volume in whole gibibytes, for example "10Gi".
    /// It may grow but never shrink.
    #[schemars(regex(pattern = r"^[0-9]+Gi$"))]
    pub storage: String,

    /// Number of instances, 1 to 5: one primary and `replicas - 1` replicas streaming
    /// from it (for engines whose replication the operator runs; the Replicated
    /// condition says so).
    #[serde(default = "default_replicas")]
    #[schemars(extend("minimum" = 1, "maximum" = 5))]
    pub replicas: i32,

    /// How the instances replicate, when there is more than one.
    #[serde(default)]
    pub replication: Replication,

    /// What happens to the persistent volumes when the Database is deleted: `Retain`
    /// (the default) keeps them, so no data is lost; `Delete` removes them.
    #[serde(default)]
    pub deletion_policy: DeletionPolicy,

    // The larger optional parts are boxed: the controller caches every Database, and
    // an absent part then takes a pointer's room rather than its own.
    /// Scheduled logical backups, and where they go.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup: Option<Box<BackupSchedule>>,

    /// Start a new Database from a dump; it goes Running once the dump is restored.
    /// Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [
        {"rule": "self == oldSelf", "message": "restoreFrom is immutable"},
        {"rule": "has(self.backup) != has(self.location)", "message": "name exactly one source: backup or location"},
    ]))]
    pub restore_from: Option<Box<RestoreSource>>,

    /// Compute resources of each instance's database container, in the Kubernetes shape.
    /// When absent: requests of 250m CPU and 512Mi memory and a 1Gi memory limit. With a
    /// memory limit the engine's memory settings follow it (postgres `shared_buffers`
    /// and `effective_cache_size`, mysql `innodb_buffer_pool_size`, mongodb's
    /// WiredTiger cache) unless `parameters` sets them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<Box<ResourceRequirements>>,

    /// The StorageClass of the instances' volumes; the cluster's default when absent.
    /// Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_class_name: Option<String>,

    /// Nodes the instances may run on, by label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<BTreeMap<String, String>>,

    /// Taints the instances tolerate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tolerations: Option<Vec<Toleration>>,

    /// Node and Pod affinity. When set it replaces the default, which prefers to put
    /// each instance on a different node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Box<Affinity>>,

    /// How the instances spread across zones, nodes or other topology domains.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology_spread_constraints: Option<Vec<TopologySpreadConstraint>>,

    /// The PriorityClass of the instances' Pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class_name: Option<String>,

    /// Labels and annotations added to the instances' Pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_metadata: Option<Box<PodMetadata>>,

    /// Engine settings, written into the engine's configuration file: postgres
    /// `postgresql.conf` names (`work_mem`), mysql option names (`max_connections`),
    /// mongodb `mongod.conf` paths (`setParameter.cursorTimeoutMillis`). Only the
    /// settings in the operator's table for the engine are accepted; those the operator
    /// owns (ports, paths, replication, authentication, TLS) are refused. A change
    /// restarts the instances one at a time only when the engine needs a restart for
    /// it, and is applied to the running servers otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<BTreeMap<String, String>>,

    /// The client Service (`<name>-rw`): its type and annotations. Without it, a
    /// Database of one instance has `-rw` as a DNS alias of the instance's name, with
    /// no cluster IP; with it, `-rw` is of its type at any number of instances.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<ClientService>,

    /// An exporter sidecar serving the engine's metrics to Prometheus.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub monitoring: Option<Monitoring>,
}

impl DatabaseSpec {
    /// A spec with the three required fields and every other one at its default.
    pub fn new(engine: Engine, version: impl Into<String>, storage: impl Into<String>) -> Self {
        Self {
            engine,
            version: version.into(),
            storage: storage.into(),
            replicas: DEFAULT_REPLICAS,
            replication: Replication::default(),
            deletion_policy: DeletionPolicy::default(),
            backup: None,
            restore_from: None,
            resources: None,
            storage_class_name: None,
            node_selector: None,
            tolerations: None,
            affinity: None,
            topology_spread_constraints: None,
            priority_class_name: None,
            pod_metadata: None,
            parameters: None,
            service: None,
            monitoring: None,
        }
    }
}

fn default_replicas() -> i32 {
    DEFAULT_REPLICAS
}

/// The supported database engines.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    Postgres,
    Mysql,
    Mongodb,
}

impl Engine {
    /// Every engine, in a fixed order.
    pub const ALL: [Engine; 3] = [Engine::Postgres, Engine::Mysql, Engine::Mongodb];

    /// The engine's name as written in the spec.
    pub fn as_str(self) -> &'static str {
        match self {
            Engine::Postgres => "postgres",
            Engine::Mysql => "mysql",
            Engine::Mongodb => "mongodb",
        }
    }
}

impl std::fmt::Display for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What deletion does to the data.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum DeletionPolicy {
    /// Keep the PersistentVolumeClaims (and so the data) after the Database is deleted.
    #[default]
    Retain,
    /// Delete the PersistentVolumeClaims with the Database.
    Delete,
}

/// Lifecycle phase shown in `kubectl get db`.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum Phase {
    /// Accepted, nothing created yet.
    #[default]
    Pending,
    /// Owned objects exist; instances are not all ready.
    Creating,
    /// Every instance is ready.
    Running,
    /// A major-version upgrade is moving the data; `status.upgrade` says how far.
    Upgrading,
    /// Something needs attention; `message` says what.
    Failed,
    /// Deletion in progress.
    Terminating,
}

/// The observed state of a Database, written by the controller through the status
/// subresource.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DatabaseStatus {
    /// Lifecycle phase.
    #[serde(default)]
    pub phase: Phase,
    /// True when every desired instance is ready.
    #[serde(default)]
    pub ready: bool,
    /// Human-readable detail about the phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// In-cluster address clients connect to: the first instance,
    /// `<name>-0.<name>.<namespace>.svc.<cluster domain>:<port>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// Number of ready instances.
    #[serde(default)]
    pub replicas: i32,
    /// Label selector of the instances' Pods, for the scale subresource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
    /// The instance that takes writes (the Pod the `-rw` Service selects).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub primary: Option<String>,
    /// Every instance: its role, whether it is ready, and a replica's lag.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub instances: Vec<InstanceStatus>,
    /// The `metadata.generation` this status was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Standard conditions: Ready, Progressing, Degraded, Replicated, Paused,
    /// LastBackupSucceeded, Restored.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// The schedule's last and next backups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backups: Option<Box<BackupsStatus>>,
    /// The revision of the engine settings (`spec.parameters` and those that follow the
    /// memory limit) every instance runs with; it trails a change until each instance
    /// has restarted with it or applied it in place.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters_revision: Option<String>,
    /// The last major-version upgrade by dump and restore.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upgrade: Option<Box<crate::upgrade::UpgradeStatus>>,
    /// The Secret applications bind to, where the Service Binding specification's
    /// Provisioned Service names it: the connection Secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binding: Option<Binding>,
}

/// A reference to the Secret that holds what a workload needs to connect.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct Binding {
    /// Name of the Secret, in the Database's namespace.
    pub name: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::CustomResourceExt;
    use serde_json::{Value, json};

    fn crd() -> Value {
        serde_json::to_value(Database::crd()).expect("CRD serializes")
    }

    #[test]
    fn a_cached_database_holds_its_absent_parts_in_a_pointers_room() {
        // The controller caches every Database: at 10,000, each 100 bytes held inline
        // is a MiB. A large optional part added unboxed shows here.
        let size = std::mem::size_of::<Database>();
        assert!(size <= 1024, "a Database is {size} bytes inline");
    }

    fn version(crd: &Value) -> &Value {
        &crd["spec"]["versions"][0]
    }

    fn spec_schema(crd: &Value) -> &Value {
        &version(crd)["schema"]["openAPIV3Schema"]["properties"]["spec"]
    }

    fn status_schema(crd: &Value) -> &Value {
        &version(crd)["schema"]["openAPIV3Schema"]["properties"]["status"]
    }

    #[test]
    fn crd_names_match_the_api_contract() {
        let crd = crd();
        assert_eq!(crd["metadata"]["name"], crate::constants::CRD_NAME);
        assert_eq!(crd["spec"]["group"], crate::constants::GROUP);
        assert_eq!(crd["spec"]["scope"], "Namespaced");
        let names = &crd["spec"]["names"];
        assert_eq!(names["kind"], "Database");
        assert_eq!(names["plural"], "databases");
        assert_eq!(names["singular"], "database");
        assert_eq!(names["shortNames"], json!(["db"]));
        assert_eq!(names["categories"], json!(["all", "mycompany"]));
        assert_eq!(version(&crd)["name"], crate::constants::VERSION);
        assert_eq!(version(&crd)["served"], true);
        assert_eq!(version(&crd)["storage"], true);
    }

    #[test]
    fn engine_is_an_enum_of_the_three_engines() {
        let crd = crd();
        let engine = &spec_schema(&crd)["properties"]["engine"];
        assert_eq!(engine["type"], "string");
        assert_eq!(engine["enum"], json!(["postgres", "mysql", "mongodb"]));
    }

    #[test]
    fn engine_is_immutable_through_a_cel_rule() {
        let crd = crd();
        let rules = &spec_schema(&crd)["properties"]["engine"]["x-kubernetes-validations"];
        assert_eq!(rules[0]["rule"], "self == oldSelf");
        assert_eq!(rules[0]["message"], "engine is immutable");
    }

    #[test]
    fn storage_must_be_whole_gibibytes() {
        let crd = crd();
        let storage = &spec_schema(&crd)["properties"]["storage"];
        assert_eq!(storage["type"], "string");
        assert_eq!(storage["pattern"], "^[0-9]+Gi$");
    }

    #[test]
    fn replicas_is_bounded_and_defaults_to_one() {
        let crd = crd();
        let replicas = &spec_schema(&crd)["properties"]["replicas"];
        assert_eq!(replicas["type"], "integer");
        assert_eq!(replicas["format"], "int32");
        assert_eq!(replicas["minimum"].as_f64(), Some(f64::from(MIN_REPLICAS)));
        assert_eq!(replicas["maximum"].as_f64(), Some(f64::from(MAX_REPLICAS)));
        assert_eq!(replicas["default"], json!(DEFAULT_REPLICAS));
    }

    #[test]
    fn version_is_a_non_empty_string() {
        let crd = crd();
        let version = &spec_schema(&crd)["properties"]["version"];
        assert_eq!(version["type"], "string");
        assert_eq!(version["minLength"], 1);
    }

    #[test]
    fn every_spec_field_but_replicas_and_deletion_policy_is_required() {
        let crd = crd();
        let mut required: Vec<&str> = spec_schema(&crd)["required"]
            .as_array()
            .expect("required list")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        required.sort_unstable();
        assert_eq!(required, ["engine", "storage", "version"]);
    }

    #[test]
    fn deletion_policy_defaults_to_retain() {
        let crd = crd();
        let policy = &spec_schema(&crd)["properties"]["deletionPolicy"];
        assert_eq!(policy["enum"], json!(["Retain", "Delete"]));
        assert_eq!(policy["default"], "Retain");
    }

    #[test]
    fn status_carries_phase_readiness_endpoint_replicas_and_selector() {
        let crd = crd();
        let props = &status_schema(&crd)["properties"];
        assert_eq!(
            props["phase"]["enum"],
            json!([
                "Pending",
                "Creating",
                "Running",
                "Upgrading",
                "Failed",
                "Terminating"
            ])
        );
        assert_eq!(props["ready"]["type"], "boolean");
        assert_eq!(props["message"]["type"], "string");
        assert_eq!(props["endpoint"]["type"], "string");
        assert_eq!(props["replicas"]["type"], "integer");
        assert_eq!(props["selector"]["type"], "string");
        assert_eq!(props["observedGeneration"]["format"], "int64");
    }

    #[test]
    fn conditions_are_a_list_map_keyed_by_type() {
        let crd = crd();
        let conditions = &status_schema(&crd)["properties"]["conditions"];
        assert_eq!(conditions["x-kubernetes-list-type"], "map");
        assert_eq!(conditions["x-kubernetes-list-map-keys"], json!(["type"]));
        let item = &conditions["items"]["properties"];
        for field in [
            "type",
            "status",
            "reason",
            "message",
            "lastTransitionTime",
            "observedGeneration",
        ] {
            assert!(item.get(field).is_some(), "condition lacks {field}");
        }
    }

    #[test]
    fn status_and_scale_subresources_point_at_replicas_and_selector() {
        let crd = crd();
        let sub = &version(&crd)["subresources"];
        assert_eq!(sub["status"], json!({}));
        assert_eq!(sub["scale"]["specReplicasPath"], ".spec.replicas");
        assert_eq!(sub["scale"]["statusReplicasPath"], ".status.replicas");
        assert_eq!(sub["scale"]["labelSelectorPath"], ".status.selector");
    }

    #[test]
    fn printer_columns_show_engine_version_replicas_status_and_age() {
        let crd = crd();
        let columns: Vec<(&str, &str)> = version(&crd)["additionalPrinterColumns"]
            .as_array()
            .expect("printer columns")
            .iter()
            .map(|c| {
                (
                    c["name"].as_str().unwrap_or(""),
                    c["jsonPath"].as_str().unwrap_or(""),
                )
            })
            .collect();
        for expected in [
            ("Engine", ".spec.engine"),
            ("Version", ".spec.version"),
            ("Replicas", ".spec.replicas"),
            ("Ready", ".status.replicas"),
            ("Status", ".status.phase"),
            ("Age", ".metadata.creationTimestamp"),
        ] {
            assert!(
                columns.contains(&expected),
                "missing column {expected:?} in {columns:?}"
            );
        }
    }

    #[test]
    fn replicas_default_applies_when_deserializing_without_it() {
        let spec: DatabaseSpec =
            serde_json::from_value(json!({"engine": "mysql", "version": "8.4", "storage": "5Gi"}))
                .expect("valid spec");
        assert_eq!(spec.replicas, DEFAULT_REPLICAS);
        assert_eq!(spec.deletion_policy, DeletionPolicy::Retain);
    }

    #[test]
    fn unknown_engine_is_refused_when_deserializing() {
        let err = serde_json::from_value::<DatabaseSpec>(
            json!({"engine": "oracle", "version": "19", "storage": "5Gi"}),
        )
        .expect_err("oracle is not an engine");
        assert!(err.to_string().contains("oracle"), "{err}");
    }
}
