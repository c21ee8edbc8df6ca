//! The StatefulSet that runs a Database's instances, each with its own volume.

use std::collections::BTreeMap;

use database_api::constants::{MYSQL_DATADIR_ANNOTATION, MYSQL_DATADIR_VOLUME_ROOT};
use database_api::{Database, DeletionPolicy};
use k8s_openapi::api::apps::v1::{
    StatefulSet, StatefulSetPersistentVolumeClaimRetentionPolicy, StatefulSetSpec,
};
use k8s_openapi::api::core::v1::{
    Affinity, ConfigMapVolumeSource, Container, ContainerPort, EmptyDirVolumeSource, EnvVar,
    ExecAction, KeyToPath, PersistentVolumeClaim, PersistentVolumeClaimSpec, PodAffinityTerm,
    PodAntiAffinity, PodSecurityContext, PodSpec, PodTemplateSpec, Probe, ResourceRequirements,
    TCPSocketAction, Volume, VolumeMount, VolumeResourceRequirements, WeightedPodAffinityTerm,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::ResourceExt;

use super::BuildConfig;
use super::credentials::Layout;
use super::engine_config;
use super::env::credential_env;
use super::meta::{init_configmap_name, labels, object_meta, selector_labels};
use super::monitoring;
use super::replication_init;
use super::security::{restricted, runtime_default};
use crate::engine::{DataLayout, EngineProfile, INIT_SCRIPTS_DIR, data_layout, image, profile};

/// Name of the volumeClaimTemplate; claims are `data-<name>-<ordinal>`.
pub const DATA_VOLUME: &str = "data";
/// Name of the volume of initialisation scripts.
const INIT_SCRIPTS_VOLUME: &str = "init-scripts";
pub use crate::keys::CONTAINER;

/// The StatefulSet for `db`. `template_storage` is the size written into the
/// volumeClaimTemplate: the spec's size, except while a volume expansion is pending,
/// because a StatefulSet's templates cannot change in place.
pub fn build_statefulset(
    db: &Database,
    config: &BuildConfig,
    template_storage: &str,
    credentials: Layout,
) -> StatefulSet {
    let engine = profile(db.spec.engine);
    StatefulSet {
        metadata: object_meta(db, db.name_any()),
        spec: Some(StatefulSetSpec {
            replicas: Some(db.spec.replicas),
            service_name: Some(db.name_any()),
            selector: LabelSelector {
                match_labels: Some(selector_labels(db)),
                ..LabelSelector::default()
            },
            persistent_volume_claim_retention_policy: Some(
                StatefulSetPersistentVolumeClaimRetentionPolicy {
                    when_deleted: Some(retention(db.spec.deletion_policy)),
                    when_scaled: Some(when_scaled(db, credentials).to_owned()),
                },
            ),
            template: PodTemplateSpec {
                metadata: Some(pod_metadata(db)),
                spec: Some(pod_spec(db, engine, config, credentials)),
            },
            volume_claim_templates: Some(vec![PersistentVolumeClaim {
                metadata: ObjectMeta {
                    name: Some(DATA_VOLUME.to_owned()),
                    labels: Some(selector_labels(db)),
                    ..ObjectMeta::default()
                },
                spec: Some(PersistentVolumeClaimSpec {
                    access_modes: Some(vec!["ReadWriteOnce".to_owned()]),
                    storage_class_name: db.spec.storage_class_name.clone(),
                    resources: Some(VolumeResourceRequirements {
                        requests: Some(BTreeMap::from([(
                            "storage".to_owned(),
                            Quantity(template_storage.to_owned()),
                        )])),
                        ..VolumeResourceRequirements::default()
                    }),
                    ..PersistentVolumeClaimSpec::default()
                }),
                ..PersistentVolumeClaim::default()
            }]),
            ..StatefulSetSpec::default()
        }),
        ..StatefulSet::default()
    }
}

/// What happens to the claim of an instance scaled away. Where the operator runs
/// replication only replicas are ever scaled away (the primary moves first), their data
/// is the primary's, and a stale copy could not catch up later: the claim goes, and an
/// instance added again starts from a fresh clone. Independent instances keep theirs.
fn when_scaled(db: &Database, credentials: Layout) -> &'static str {
    if credentials.replicates(db.spec.engine) {
        "Delete"
    } else {
        "Retain"
    }
}

fn retention(policy: DeletionPolicy) -> String {
    match policy {
        DeletionPolicy::Retain => "Retain",
        DeletionPolicy::Delete => "Delete",
    }
    .to_owned()
}

fn pod_spec(
    db: &Database,
    engine: &EngineProfile,
    config: &BuildConfig,
    credentials: Layout,
) -> PodSpec {
    let layout = data_layout(db.spec.engine, &db.spec.version);
    let replicated = credentials.replicates(db.spec.engine);
    let configured = engine_config::effective(db).is_some();
    let (volumes, mounts) = pod_volumes(db, engine, credentials, &layout, configured);
    let mut env = credential_env(db, engine, credentials);
    env.extend(data_env(db, &layout));
    env.extend(monitoring::database_env(db));
    let args = server_args(db, engine, &layout, configured, replicated);
    let database = Container {
        args: (!args.is_empty()).then_some(args),
        ..container(db, engine, config, env, mounts)
    };
    PodSpec {
        automount_service_account_token: Some(false),
        enable_service_links: Some(false),
        // Databases flush on SIGTERM; give them longer than the 30 s default.
        termination_grace_period_seconds: Some(60),
        security_context: Some(PodSecurityContext {
            run_as_non_root: Some(true),
            run_as_user: Some(engine.uid),
            run_as_group: Some(engine.uid),
            fs_group: Some(engine.uid),
            fs_group_change_policy: Some("OnRootMismatch".to_owned()),
            seccomp_profile: Some(runtime_default()),
            ..PodSecurityContext::default()
        }),
        init_containers: replicated.then(|| vec![replication_init::container(db, &database)]),
        containers: std::iter::once(database)
            .chain(monitoring::exporter_container(db))
            .collect(),
        volumes: Some(volumes),
        ..scheduling(db)
    }
}

/// The Pod's volumes and the database container's mounts, in order: the data volume,
/// the engine's scratch directories, the initialisation scripts, the replication init
/// container's volumes and the configuration file.
fn pod_volumes(
    db: &Database,
    engine: &EngineProfile,
    credentials: Layout,
    layout: &DataLayout,
    configured: bool,
) -> (Vec<Volume>, Vec<VolumeMount>) {
    let mut mounts = vec![VolumeMount {
        name: DATA_VOLUME.to_owned(),
        mount_path: layout.mount_path.to_owned(),
        ..VolumeMount::default()
    }];
    let mut volumes = Vec::new();
    for (index, dir) in engine.scratch_dirs.iter().enumerate() {
        let name = format!("scratch-{index}");
        mounts.push(VolumeMount {
            name: name.clone(),
            mount_path: (*dir).to_owned(),
            ..VolumeMount::default()
        });
        volumes.push(Volume {
            name,
            empty_dir: Some(EmptyDirVolumeSource::default()),
            ..Volume::default()
        });
    }
    // Scripts run only on an empty data directory, which a Secret of an earlier layout
    // never meets.
    if let (true, Some((file, _))) = (credentials.has_admin(), engine.init_script) {
        let (volume, mount) = init_scripts(db, file);
        volumes.push(volume);
        mounts.push(mount);
    }
    if credentials.replicates(db.spec.engine) {
        volumes.extend(replication_init::volumes(db));
    }
    if configured {
        let (volume, mount) = engine_config::volume(db);
        volumes.push(volume);
        mounts.push(mount);
    }
    (volumes, mounts)
}

/// The volume of the initialisation script `file`, from the init ConfigMap, and its
/// read-only mount where the image runs such scripts.
fn init_scripts(db: &Database, file: &str) -> (Volume, VolumeMount) {
    let volume = Volume {
        name: INIT_SCRIPTS_VOLUME.to_owned(),
        config_map: Some(ConfigMapVolumeSource {
            name: init_configmap_name(db),
            items: Some(vec![KeyToPath {
                key: file.to_owned(),
                path: file.to_owned(),
                ..KeyToPath::default()
            }]),
            ..ConfigMapVolumeSource::default()
        }),
        ..Volume::default()
    };
    let mount = VolumeMount {
        name: INIT_SCRIPTS_VOLUME.to_owned(),
        mount_path: INIT_SCRIPTS_DIR.to_owned(),
        read_only: Some(true),
        ..VolumeMount::default()
    };
    (volume, mount)
}

/// The database server's arguments: the configuration file's, then the data layout's,
/// then replication's.
fn server_args(
    db: &Database,
    engine: &EngineProfile,
    layout: &DataLayout,
    configured: bool,
    replicated: bool,
) -> Vec<String> {
    // The configuration file's arguments go first: mysql reads its option only there.
    let mut args: Vec<String> = if configured {
        engine_config::server_args(db.spec.engine)
    } else {
        Vec::new()
    };
    if !keeps_mysql_data_at_volume_root(db) {
        args.extend(layout.args.iter().map(|a| (*a).to_owned()));
    }
    if replicated {
        args.extend(engine.replication_args.iter().map(|a| (*a).to_owned()));
    }
    args
}

/// The variable naming the data directory, for engines whose layout sets one.
fn data_env(db: &Database, layout: &DataLayout) -> Option<EnvVar> {
    // An upgraded postgres major keeps its data in a directory of its own.
    let (name, value) = match (crate::upgrade::recorded_directory(db), layout.env) {
        (Some(directory), _) => Some(("PGDATA", directory)),
        (None, env) => env,
    }?;
    Some(EnvVar {
        name: name.to_owned(),
        value: Some(value.to_owned()),
        ..EnvVar::default()
    })
}

fn container(
    db: &Database,
    engine: &EngineProfile,
    config: &BuildConfig,
    env: Vec<EnvVar>,
    mounts: Vec<VolumeMount>,
) -> Container {
    let port = IntOrString::String(engine.port_name.to_owned());
    Container {
        name: CONTAINER.to_owned(),
        image: Some(image(
            db.spec.engine,
            &db.spec.version,
            config.image_registry.as_deref(),
        )),
        image_pull_policy: Some("IfNotPresent".to_owned()),
        ports: Some(vec![ContainerPort {
            name: Some(engine.port_name.to_owned()),
            container_port: engine.port,
            protocol: Some("TCP".to_owned()),
            ..ContainerPort::default()
        }]),
        env: Some(env),
        volume_mounts: Some(mounts),
        readiness_probe: Some(readiness_probe(engine)),
        liveness_probe: Some(liveness_probe(port.clone())),
        startup_probe: Some(startup_probe(port)),
        resources: Some(
            db.spec
                .resources
                .as_deref()
                .cloned()
                .unwrap_or_else(default_resources),
        ),
        security_context: Some(restricted()),
        ..Container::default()
    }
}

/// Ready once the engine's own readiness command succeeds.
fn readiness_probe(engine: &EngineProfile) -> Probe {
    Probe {
        exec: Some(ExecAction {
            command: Some(
                engine
                    .readiness_command
                    .iter()
                    .map(|s| (*s).to_owned())
                    .collect(),
            ),
        }),
        initial_delay_seconds: Some(5),
        period_seconds: Some(10),
        timeout_seconds: Some(5),
        failure_threshold: Some(3),
        ..Probe::default()
    }
}

/// Liveness only asks whether the server accepts connections on `port`: a slow query
/// must not get the database killed.
fn liveness_probe(port: IntOrString) -> Probe {
    Probe {
        tcp_socket: Some(TCPSocketAction {
            port,
            ..TCPSocketAction::default()
        }),
        initial_delay_seconds: Some(30),
        period_seconds: Some(10),
        timeout_seconds: Some(5),
        failure_threshold: Some(6),
        ..Probe::default()
    }
}

/// Started once the server accepts connections on `port`, giving it five minutes.
fn startup_probe(port: IntOrString) -> Probe {
    Probe {
        tcp_socket: Some(TCPSocketAction {
            port,
            ..TCPSocketAction::default()
        }),
        period_seconds: Some(5),
        failure_threshold: Some(60),
        ..Probe::default()
    }
}

/// Where the Pods may run: the spec's scheduling fields, and the default soft
/// anti-affinity unless the spec gives an affinity of its own.
fn scheduling(db: &Database) -> PodSpec {
    PodSpec {
        affinity: Some(
            db.spec
                .affinity
                .as_deref()
                .cloned()
                .unwrap_or_else(|| spread_across_nodes(db)),
        ),
        node_selector: db.spec.node_selector.clone(),
        tolerations: db.spec.tolerations.clone(),
        topology_spread_constraints: db.spec.topology_spread_constraints.clone(),
        priority_class_name: db.spec.priority_class_name.clone(),
        ..PodSpec::default()
    }
}

/// The resources of a Database that gives none. Memory is limited so one database
/// cannot starve a node; CPU is not, so a busy database is never throttled while the
/// node is idle.
fn default_resources() -> ResourceRequirements {
    ResourceRequirements {
        requests: Some(BTreeMap::from([
            ("cpu".to_owned(), Quantity("250m".to_owned())),
            ("memory".to_owned(), Quantity("512Mi".to_owned())),
        ])),
        limits: Some(BTreeMap::from([(
            "memory".to_owned(),
            Quantity("1Gi".to_owned()),
        )])),
        ..ResourceRequirements::default()
    }
}

/// The Pod template's labels and annotations: the user's, then the operator's (which
/// validation keeps the user from giving), and the fingerprint of the settings that
/// need a restart.
fn pod_metadata(db: &Database) -> ObjectMeta {
    let user = db.spec.pod_metadata.clone().unwrap_or_default();
    let mut pod_labels = user.labels;
    pod_labels.extend(labels(db));
    let mut annotations = user.annotations;
    if let Some(settings) = engine_config::effective(db) {
        annotations.insert(
            engine_config::RESTART_ANNOTATION.to_owned(),
            engine_config::restart_revision(db.spec.engine, &settings),
        );
    }
    ObjectMeta {
        labels: Some(pod_labels),
        annotations: (!annotations.is_empty()).then_some(annotations),
        ..ObjectMeta::default()
    }
}

/// The data directory postgres runs with (its `PGDATA`), which the configuration file
/// includes the initdb-written `postgresql.conf` from.
pub fn data_directory(db: &Database) -> Option<String> {
    if db.spec.engine != database_api::Engine::Postgres {
        return None;
    }
    if let Some(directory) = crate::upgrade::recorded_directory(db) {
        return Some(directory.to_owned());
    }
    match data_layout(db.spec.engine, &db.spec.version).env {
        Some((_, directory)) => Some(directory.to_owned()),
        None => crate::engine::major(&db.spec.version).map(crate::upgrade::directory_for),
    }
}

/// Whether `db` is a mysql Database whose data was initialised at the volume's root
/// (before the data moved into a subfolder); it stays there.
fn keeps_mysql_data_at_volume_root(db: &Database) -> bool {
    db.annotations()
        .get(MYSQL_DATADIR_ANNOTATION)
        .is_some_and(|v| v == MYSQL_DATADIR_VOLUME_ROOT)
}

/// Soft anti-affinity: instances prefer different nodes, but still schedule when there
/// are fewer nodes than instances. It is there whatever the replica count, so scaling
/// between one instance and more never changes the Pod template (which would restart
/// the primary).
fn spread_across_nodes(db: &Database) -> Affinity {
    Affinity {
        pod_anti_affinity: Some(PodAntiAffinity {
            preferred_during_scheduling_ignored_during_execution: Some(vec![
                WeightedPodAffinityTerm {
                    weight: 100,
                    pod_affinity_term: PodAffinityTerm {
                        topology_key: "kubernetes.io/hostname".to_owned(),
                        label_selector: Some(LabelSelector {
                            match_labels: Some(selector_labels(db)),
                            ..LabelSelector::default()
                        }),
                        ..PodAffinityTerm::default()
                    },
                },
            ]),
            ..PodAntiAffinity::default()
        }),
        ..Affinity::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::fixtures::database;
    use database_api::Engine;

    fn container(set: &StatefulSet) -> &Container {
        &set.spec
            .as_ref()
            .expect("spec")
            .template
            .spec
            .as_ref()
            .expect("pod")
            .containers[0]
    }

    fn mount_path(set: &StatefulSet, volume: &str) -> Option<String> {
        container(set)
            .volume_mounts
            .as_ref()?
            .iter()
            .find(|m| m.name == volume)
            .map(|m| m.mount_path.clone())
    }

    fn env(set: &StatefulSet, name: &str) -> Option<EnvVar> {
        container(set)
            .env
            .as_ref()?
            .iter()
            .find(|e| e.name == name)
            .cloned()
    }

    #[test]
    fn postgres_16_mounts_data_with_pgdata_in_a_subfolder() {
        let set = build_statefulset(
            &database(Engine::Postgres, "16.4", 1),
            &BuildConfig::default(),
            "10Gi",
            Layout::SeparateAdmin,
        );
        assert_eq!(container(&set).image.as_deref(), Some("postgres:16.4"));
        assert_eq!(
            mount_path(&set, DATA_VOLUME).as_deref(),
            Some("/var/lib/postgresql/data")
        );
        assert_eq!(
            env(&set, "PGDATA").and_then(|e| e.value).as_deref(),
            Some("/var/lib/postgresql/data/pgdata")
        );
    }

    #[test]
    fn postgres_18_mounts_the_new_data_root() {
        let set = build_statefulset(
            &database(Engine::Postgres, "18.1", 1),
            &BuildConfig::default(),
            "10Gi",
            Layout::SeparateAdmin,
        );
        assert_eq!(
            mount_path(&set, DATA_VOLUME).as_deref(),
            Some("/var/lib/postgresql")
        );
        assert!(env(&set, "PGDATA").is_none());
    }

    #[test]
    fn credentials_come_from_the_secret_under_the_images_variable_names() {
        let set = build_statefulset(
            &database(Engine::Mysql, "8.4", 1),
            &BuildConfig::default(),
            "10Gi",
            Layout::SeparateAdmin,
        );
        for (name, key) in [
            ("MYSQL_USER", "username"),
            ("MYSQL_PASSWORD", "password"),
            ("MYSQL_DATABASE", "database"),
            ("MYSQL_ROOT_PASSWORD", "admin-password"),
        ] {
            let var = env(&set, name).unwrap_or_else(|| panic!("{name} missing"));
            let selector = var
                .value_from
                .and_then(|v| v.secret_key_ref)
                .expect("from a Secret");
            assert_eq!(
                (selector.name.as_str(), selector.key.as_str()),
                ("orders-credentials", key)
            );
            assert!(var.value.is_none(), "{name} must not be inlined");
        }
    }

    #[test]
    fn mysql_keeps_its_data_in_a_subfolder_unless_it_already_lives_at_the_volume_root() {
        let mut db = database(Engine::Mysql, "9.7", 1);
        let args = |db: &Database| {
            container(&build_statefulset(
                db,
                &BuildConfig::default(),
                "10Gi",
                Layout::SeparateAdmin,
            ))
            .args
            .clone()
        };
        assert_eq!(
            args(&db),
            Some(vec!["--datadir=/var/lib/mysql/data".to_owned()])
        );
        db.annotations_mut().insert(
            MYSQL_DATADIR_ANNOTATION.to_owned(),
            MYSQL_DATADIR_VOLUME_ROOT.to_owned(),
        );
        assert_eq!(args(&db), None);
        assert_eq!(args(&database(Engine::Postgres, "17", 1)), None);
    }

    #[test]
    fn the_init_script_is_mounted_only_where_it_can_still_run() {
        let has_scripts = |engine: Engine, layout: Layout| {
            let set = build_statefulset(
                &database(engine, "17", 1),
                &BuildConfig::default(),
                "10Gi",
                layout,
            );
            mount_path(&set, INIT_SCRIPTS_VOLUME).is_some()
        };
        assert!(has_scripts(Engine::Postgres, Layout::SeparateAdmin));
        assert!(has_scripts(Engine::Mongodb, Layout::SeparateAdmin));
        assert!(
            has_scripts(Engine::Mysql, Layout::SeparateAdmin),
            "the replication user"
        );
        assert!(
            !has_scripts(Engine::Mysql, Layout::MysqlRootPassword),
            "set up by an earlier version"
        );
        assert!(
            !has_scripts(Engine::Postgres, Layout::AppIsSuperuser),
            "set up by an earlier version"
        );
    }

    #[test]
    fn volume_claim_template_is_sized_from_the_given_storage() {
        let set = build_statefulset(
            &database(Engine::Mongodb, "7.0", 1),
            &BuildConfig::default(),
            "25Gi",
            Layout::SeparateAdmin,
        );
        let template = &set
            .spec
            .expect("spec")
            .volume_claim_templates
            .expect("templates")[0];
        let requests = template
            .spec
            .as_ref()
            .and_then(|s| s.resources.as_ref())
            .and_then(|r| r.requests.as_ref())
            .expect("requests");
        assert_eq!(requests["storage"], Quantity("25Gi".into()));
        assert_eq!(template.metadata.name.as_deref(), Some("data"));
    }

    #[test]
    fn pods_run_as_the_images_non_root_user_with_nothing_extra_allowed() {
        let set = build_statefulset(
            &database(Engine::Postgres, "16.4", 1),
            &BuildConfig::default(),
            "10Gi",
            Layout::SeparateAdmin,
        );
        let pod = set
            .spec
            .as_ref()
            .and_then(|s| s.template.spec.as_ref())
            .expect("pod");
        let pod_sc = pod.security_context.as_ref().expect("pod security context");
        assert_eq!(
            (pod_sc.run_as_user, pod_sc.fs_group, pod_sc.run_as_non_root),
            (Some(999), Some(999), Some(true))
        );
        assert_eq!(
            pod_sc.seccomp_profile.as_ref().map(|p| p.type_.as_str()),
            Some("RuntimeDefault")
        );
        let sc = container(&set)
            .security_context
            .as_ref()
            .expect("container security context");
        assert_eq!(sc.allow_privilege_escalation, Some(false));
        assert_eq!(sc.read_only_root_filesystem, Some(true));
        assert_eq!(
            sc.capabilities.as_ref().and_then(|c| c.drop.clone()),
            Some(vec!["ALL".to_owned()])
        );
        assert_eq!(pod.automount_service_account_token, Some(false));
    }

    #[test]
    fn the_deletion_policy_sets_the_claim_retention_policy() {
        let mut db = database(Engine::Postgres, "16.4", 1);
        let policy = |db: &Database| {
            build_statefulset(db, &BuildConfig::default(), "10Gi", Layout::SeparateAdmin)
                .spec
                .and_then(|s| s.persistent_volume_claim_retention_policy)
                .expect("policy")
        };
        assert_eq!(policy(&db).when_deleted.as_deref(), Some("Retain"));
        db.spec.deletion_policy = DeletionPolicy::Delete;
        assert_eq!(policy(&db).when_deleted.as_deref(), Some("Delete"));
        assert_eq!(
            policy(&db).when_scaled.as_deref(),
            Some("Delete"),
            "a replicated postgres scales away replicas only"
        );
        let independent = build_statefulset(
            &database(Engine::Mongodb, "7.0", 3),
            &BuildConfig::default(),
            "10Gi",
            Layout::AdminWithoutReplicaSetKey,
        );
        assert_eq!(
            independent
                .spec
                .and_then(|s| s.persistent_volume_claim_retention_policy)
                .and_then(|p| p.when_scaled)
                .as_deref(),
            Some("Retain"),
            "independent instances keep their data"
        );
    }

    #[test]
    fn soft_anti_affinity_is_the_same_whatever_the_replica_count() {
        let affinity = |replicas: i32| {
            build_statefulset(
                &database(Engine::Mysql, "8.4", replicas),
                &BuildConfig::default(),
                "10Gi",
                Layout::SeparateAdmin,
            )
            .spec
            .and_then(|s| s.template.spec)
            .and_then(|p| p.affinity)
        };
        assert_eq!(
            affinity(1),
            affinity(3),
            "scaling must not change the Pod template"
        );
        let anti = affinity(3)
            .and_then(|a| a.pod_anti_affinity)
            .expect("anti-affinity");
        assert!(
            anti.required_during_scheduling_ignored_during_execution
                .is_none(),
            "must stay soft"
        );
        assert!(
            anti.preferred_during_scheduling_ignored_during_execution
                .is_some()
        );
    }

    #[test]
    fn a_mirror_registry_is_used_for_the_image() {
        let config = BuildConfig {
            image_registry: Some("mirror.local/library".into()),
            ..BuildConfig::default()
        };
        let set = build_statefulset(
            &database(Engine::Mongodb, "7.0", 1),
            &config,
            "10Gi",
            Layout::SeparateAdmin,
        );
        assert_eq!(
            container(&set).image.as_deref(),
            Some("mirror.local/library/mongo:7.0")
        );
    }

    fn with(db: &mut Database, spec: &serde_json::Value) {
        let mut value = serde_json::to_value(&db.spec).expect("spec");
        for (key, field) in spec.as_object().expect("object") {
            value[key] = field.clone();
        }
        db.spec = serde_json::from_value(value).expect("spec");
    }

    fn pod(set: &StatefulSet) -> &PodSpec {
        set.spec
            .as_ref()
            .expect("spec")
            .template
            .spec
            .as_ref()
            .expect("pod")
    }

    /// A mysql Database of three instances that sets every production field.
    fn production_database() -> Database {
        let mut db = database(Engine::Mysql, "8.4", 3);
        with(
            &mut db,
            &serde_json::json!({
                "resources": {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"memory": "2Gi"}},
                "storageClassName": "fast-ssd",
                "nodeSelector": {"disktype": "ssd"},
                "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "db", "effect": "NoSchedule"}],
                "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}},
                "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}],
                "priorityClassName": "databases",
                "podMetadata": {"labels": {"team": "payments"}, "annotations": {"example.com/scrape": "true"}},
                "parameters": {"max_connections": "300"},
            }),
        );
        db
    }

    /// Checks that the production Database's scheduling fields reach the Pod.
    fn assert_production_scheduling(pod: &PodSpec) {
        assert_eq!(
            pod.node_selector.as_ref().expect("selector")["disktype"],
            "ssd"
        );
        assert_eq!(
            pod.tolerations.as_ref().expect("tolerations")[0]
                .value
                .as_deref(),
            Some("db")
        );
        let affinity = pod.affinity.as_ref().expect("affinity");
        assert!(affinity.node_affinity.is_some());
        assert!(
            affinity.pod_anti_affinity.is_none(),
            "the user's affinity replaces the default"
        );
        assert_eq!(
            pod.topology_spread_constraints.as_ref().expect("spread")[0].max_skew,
            1
        );
        assert_eq!(pod.priority_class_name.as_deref(), Some("databases"));
    }

    /// Checks that the production Database's Pod metadata reaches the template beside
    /// the operator's own labels and restart annotation.
    fn assert_production_metadata(template: &PodTemplateSpec) {
        let metadata = template.metadata.as_ref().expect("metadata");
        let labels = metadata.labels.as_ref().expect("labels");
        assert_eq!(labels["team"], "payments");
        assert_eq!(labels["app.kubernetes.io/instance"], "orders");
        let annotations = metadata.annotations.as_ref().expect("annotations");
        assert_eq!(annotations["example.com/scrape"], "true");
        assert!(annotations.contains_key(engine_config::RESTART_ANNOTATION));
    }

    #[test]
    fn every_production_field_reaches_the_statefulset() {
        let db = production_database();
        let set = build_statefulset(&db, &BuildConfig::default(), "10Gi", Layout::SeparateAdmin);
        let spec = set.spec.as_ref().expect("spec");
        let claim = &spec.volume_claim_templates.as_ref().expect("claims")[0];
        assert_eq!(
            claim
                .spec
                .as_ref()
                .expect("claim")
                .storage_class_name
                .as_deref(),
            Some("fast-ssd")
        );
        assert_production_scheduling(pod(&set));
        let limits = container(&set)
            .resources
            .as_ref()
            .expect("resources")
            .limits
            .as_ref()
            .expect("limits");
        assert_eq!(limits["memory"].0, "2Gi");
        assert_production_metadata(&spec.template);
        let args = container(&set).args.clone().expect("args");
        assert_eq!(
            args[..2],
            [
                "--defaults-extra-file=/etc/database/config/my.cnf".to_owned(),
                crate::engine::MYSQL_DATADIR_ARG.to_owned()
            ]
        );
        assert_eq!(
            mount_path(&set, "engine-config").as_deref(),
            Some("/etc/database/config")
        );
    }

    #[test]
    fn without_settings_nothing_is_mounted_and_the_defaults_hold() {
        let set = build_statefulset(
            &database(Engine::Postgres, "17", 1),
            &BuildConfig::default(),
            "10Gi",
            Layout::SeparateAdmin,
        );
        assert_eq!(mount_path(&set, "engine-config"), None);
        assert_eq!(container(&set).args, None);
        let resources = container(&set).resources.clone().expect("resources");
        assert_eq!(resources.limits.expect("limits")["memory"].0, "1Gi");
        assert_eq!(resources.requests.expect("requests")["cpu"].0, "250m");
        assert!(
            pod(&set)
                .affinity
                .as_ref()
                .expect("affinity")
                .pod_anti_affinity
                .is_some()
        );
        assert_eq!(
            set.spec
                .as_ref()
                .expect("spec")
                .template
                .metadata
                .as_ref()
                .expect("meta")
                .annotations,
            None
        );
    }

    #[test]
    fn postgres_reads_its_file_through_config_file_and_includes_its_data_directory() {
        let mut db = database(Engine::Postgres, "16.4", 1);
        with(
            &mut db,
            &serde_json::json!({"parameters": {"work_mem": "8MB"}}),
        );
        let set = build_statefulset(&db, &BuildConfig::default(), "10Gi", Layout::SeparateAdmin);
        assert_eq!(
            container(&set).args.clone().expect("args"),
            ["-c", "config_file=/etc/database/config/postgresql.conf"]
        );
        assert_eq!(
            data_directory(&db).as_deref(),
            Some("/var/lib/postgresql/data/pgdata")
        );
        let eighteen = database(Engine::Postgres, "18.1", 1);
        assert_eq!(
            data_directory(&eighteen).as_deref(),
            Some("/var/lib/postgresql/18/docker")
        );
    }
}
