//! The init container that makes an instance the primary's replica before its server
//! starts (see the engine's replication script), and the volumes it reads: the topology
//! ConfigMap that names the primary, and the script.

use database_api::Database;
use k8s_openapi::api::core::v1::{
    ConfigMapVolumeSource, Container, EnvVar, EnvVarSource, KeyToPath, ObjectFieldSelector, Volume,
    VolumeMount,
};
use kube::ResourceExt;

use super::meta::{init_configmap_name, topology_configmap_name};

/// The ConfigMap key of the replication script.
pub const SCRIPT_KEY: &str = "replication.sh";
/// The topology ConfigMap's key naming the primary.
pub const PRIMARY_KEY: &str = "primary";
/// The topology ConfigMap's key saying how many instances a mongodb replica set's
/// members span (the highest member's ordinal + 1): the StatefulSet keeps that many, so
/// a member's Pod goes only once the member has left the set and the set keeps its
/// majority while it shrinks.
pub const MEMBERS_SPAN_KEY: &str = "members-span";
const TOPOLOGY_VOLUME: &str = "topology";
const TOPOLOGY_DIR: &str = "/etc/database/topology";
const SCRIPTS_VOLUME: &str = "replication-script";
const SCRIPTS_DIR: &str = "/etc/database/scripts";
/// Name of the init container.
pub const INIT_CONTAINER: &str = "replication";

/// The volumes the init container reads.
pub fn volumes(db: &Database) -> Vec<Volume> {
    vec![
        Volume {
            name: TOPOLOGY_VOLUME.to_owned(),
            config_map: Some(ConfigMapVolumeSource {
                name: topology_configmap_name(db),
                ..ConfigMapVolumeSource::default()
            }),
            ..Volume::default()
        },
        Volume {
            name: SCRIPTS_VOLUME.to_owned(),
            config_map: Some(ConfigMapVolumeSource {
                name: init_configmap_name(db),
                items: Some(vec![KeyToPath {
                    key: SCRIPT_KEY.to_owned(),
                    path: SCRIPT_KEY.to_owned(),
                    ..KeyToPath::default()
                }]),
                ..ConfigMapVolumeSource::default()
            }),
            ..Volume::default()
        },
    ]
}

/// The init container, made from the database container: the same image, user,
/// variables and volumes, plus the topology, the script, its Pod's name and the
/// headless Service's.
pub fn container(db: &Database, database: &Container) -> Container {
    let mut env = database.env.clone().unwrap_or_default();
    env.push(EnvVar {
        name: "POD_NAME".to_owned(),
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: "metadata.name".to_owned(),
                ..ObjectFieldSelector::default()
            }),
            ..EnvVarSource::default()
        }),
        ..EnvVar::default()
    });
    env.push(EnvVar {
        name: "SERVICE_NAME".to_owned(),
        value: Some(db.name_any()),
        ..EnvVar::default()
    });
    let mut mounts = database.volume_mounts.clone().unwrap_or_default();
    for (name, path) in [
        (TOPOLOGY_VOLUME, TOPOLOGY_DIR),
        (SCRIPTS_VOLUME, SCRIPTS_DIR),
    ] {
        mounts.push(VolumeMount {
            name: name.to_owned(),
            mount_path: path.to_owned(),
            read_only: Some(true),
            ..VolumeMount::default()
        });
    }
    Container {
        name: INIT_CONTAINER.to_owned(),
        image: database.image.clone(),
        image_pull_policy: database.image_pull_policy.clone(),
        command: Some(vec![
            "bash".to_owned(),
            format!("{SCRIPTS_DIR}/{SCRIPT_KEY}"),
        ]),
        env: Some(env),
        volume_mounts: Some(mounts),
        resources: database.resources.clone(),
        security_context: database.security_context.clone(),
        ..Container::default()
    }
}
