//! The Jobs that move dumps, as pure functions: a backup (the engine's dump into the
//! agent, which stores it), a restore (the agent reads it back into the engine's
//! restore tool) and a deletion (the agent alone).
//!
//! Every container runs as its image's non-root user on a read-only root filesystem
//! with no capabilities; the Pods get no service-account token, since nothing in them
//! talks to the API server. The engine container and the agent meet at a named pipe in
//! a shared emptyDir, so a dump is never held whole in memory or on disk.

use std::collections::BTreeMap;

use database_api::Database;
use database_api::backup::{
    ACCESS_KEY_ID, BackupDestination, DEFAULT_REGION, SECRET_ACCESS_KEY, agent as env,
};
use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{
    Container, EmptyDirVolumeSource, EnvVar, EnvVarSource, KeyToPath,
    PersistentVolumeClaimVolumeSource, PodSecurityContext, PodSpec, PodTemplateSpec,
    ResourceRequirements, SecretKeySelector, SecretVolumeSource, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use super::dump::{self, CONNECTION_KEYS, PIPE, STATUS, STREAM_DIR};
use crate::engine::{image, profile};
use crate::resources::BuildConfig;
use crate::resources::meta::connection_secret_name;
use crate::resources::security::{restricted_as, runtime_default};

/// The agent image's non-root user (distroless `nonroot`).
pub const AGENT_UID: i64 = 65_532;
/// Where a volume destination is mounted in the agent's container.
const VOLUME_MOUNT: &str = "/backup";
/// Where a destination's CA certificate is mounted.
const CA_DIR: &str = "/etc/backup-ca";
const CA_FILE: &str = "ca.crt";
/// A backup or restore may run this long before it is stopped.
const DEADLINE_SECONDS: i64 = 12 * 3600;
/// The container names, read back from the Pod's status.
pub const AGENT: &str = "agent";
pub const ENGINE: &str = "engine";

/// What a Job needs besides the Database.
pub struct JobInputs<'a> {
    pub name: String,
    /// The owner: the DatabaseBackup for a backup or a deletion, the Database for a
    /// restore.
    pub owner: Option<OwnerReference>,
    /// The Database's namespace and name.
    pub namespace: &'a str,
    pub database: &'a str,
    pub destination: &'a BackupDestination,
    pub key: &'a str,
    pub agent_image: &'a str,
    pub build: &'a BuildConfig,
}

/// A Job that dumps `db` and stores the dump at `inputs.key`.
pub fn backup(db: &Database, inputs: &JobInputs<'_>) -> Job {
    let engine = engine_container(db, inputs.build, &dump::dump_script(db.spec.engine));
    let agent = agent_container(
        inputs,
        vec![
            "upload".into(),
            format!("--key={}", inputs.key),
            format!("--input={PIPE}"),
            format!("--status={STATUS}"),
        ],
    );
    job(
        inputs,
        vec![pipe_container(db, inputs.build)],
        vec![engine, agent],
    )
}

/// A Job that restores the dump at `inputs.key` into `db`.
pub fn restore(db: &Database, inputs: &JobInputs<'_>) -> Job {
    let engine = engine_container(db, inputs.build, &dump::restore_script(db.spec.engine));
    let agent = agent_container(
        inputs,
        vec![
            "download".into(),
            format!("--key={}", inputs.key),
            format!("--output={PIPE}"),
        ],
    );
    job(
        inputs,
        vec![pipe_container(db, inputs.build)],
        vec![engine, agent],
    )
}

/// A Job that deletes the dump at `inputs.key` (its Database may be gone).
pub fn delete(inputs: &JobInputs<'_>) -> Job {
    let agent = agent_container(
        inputs,
        vec!["delete".into(), format!("--key={}", inputs.key)],
    );
    job(inputs, Vec::new(), vec![agent])
}

fn job(inputs: &JobInputs<'_>, init: Vec<Container>, containers: Vec<Container>) -> Job {
    let meta_labels = job_labels(inputs.database);
    Job {
        metadata: ObjectMeta {
            name: Some(inputs.name.clone()),
            namespace: Some(inputs.namespace.to_owned()),
            labels: Some(meta_labels.clone()),
            owner_references: inputs.owner.clone().map(|o| vec![o]),
            ..ObjectMeta::default()
        },
        spec: Some(JobSpec {
            // A failed dump is reported, not retried: the next scheduled one runs.
            backoff_limit: Some(0),
            active_deadline_seconds: Some(DEADLINE_SECONDS),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(meta_labels),
                    ..ObjectMeta::default()
                }),
                spec: Some(pod_spec(inputs, init, containers)),
            },
            ..JobSpec::default()
        }),
        ..Job::default()
    }
}

/// The Job's Pod: runs once, without an API token, as non-root, with `job_volumes`.
fn pod_spec(inputs: &JobInputs<'_>, init: Vec<Container>, containers: Vec<Container>) -> PodSpec {
    PodSpec {
        restart_policy: Some("Never".into()),
        automount_service_account_token: Some(false),
        enable_service_links: Some(false),
        security_context: Some(PodSecurityContext {
            run_as_non_root: Some(true),
            // The agent writes to a volume destination as this group.
            fs_group: inputs.destination.volume.as_ref().map(|_| AGENT_UID),
            seccomp_profile: Some(runtime_default()),
            ..PodSecurityContext::default()
        }),
        init_containers: (!init.is_empty()).then_some(init),
        containers,
        volumes: Some(job_volumes(inputs.destination)),
        ..PodSpec::default()
    }
}

/// The Pod's volumes: the stream and scratch emptyDirs, then the destination's CA
/// certificate and claim when it has them.
fn job_volumes(destination: &BackupDestination) -> Vec<Volume> {
    let mut volumes = vec![Volume {
        name: "stream".into(),
        empty_dir: Some(EmptyDirVolumeSource {
            size_limit: Some(Quantity("16Mi".into())),
            ..EmptyDirVolumeSource::default()
        }),
        ..Volume::default()
    }];
    volumes.push(Volume {
        name: "tmp".into(),
        empty_dir: Some(EmptyDirVolumeSource::default()),
        ..Volume::default()
    });
    if let Some(s3) = &destination.s3
        && let Some(ca) = &s3.ca
    {
        volumes.push(Volume {
            name: "ca".into(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(ca.name.clone()),
                items: Some(vec![KeyToPath {
                    key: ca.key.clone(),
                    path: CA_FILE.into(),
                    ..KeyToPath::default()
                }]),
                ..SecretVolumeSource::default()
            }),
            ..Volume::default()
        });
    }
    if let Some(volume) = &destination.volume {
        volumes.push(Volume {
            name: "destination".into(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: volume.claim_name.clone(),
                read_only: Some(false),
            }),
            ..Volume::default()
        });
    }
    volumes
}

/// The labels of a Job and its Pod: managed by the operator, and naming the Database.
pub fn job_labels(database: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (
            database_api::constants::labels::MANAGED_BY.to_owned(),
            database_api::constants::labels::MANAGED_BY_VALUE.to_owned(),
        ),
        (
            database_api::backup::DATABASE_LABEL.to_owned(),
            database.to_owned(),
        ),
    ])
}

/// Makes the named pipe, in the engine's image, before the two sides start.
fn pipe_container(db: &Database, build: &BuildConfig) -> Container {
    Container {
        name: "pipe".into(),
        command: Some(vec![
            "mkfifo".into(),
            "-m".into(),
            "666".into(),
            PIPE.into(),
        ]),
        ..engine_base(db, build)
    }
}

fn engine_container(db: &Database, build: &BuildConfig, script: &str) -> Container {
    let connection = connection_secret_name(db);
    let mut env: Vec<_> = CONNECTION_KEYS
        .iter()
        .map(|key| {
            secret_env(
                &format!("DATABASE_{}", key.to_uppercase()),
                &connection,
                key,
            )
        })
        .collect();
    if db.spec.engine == database_api::Engine::Postgres {
        // A database whose writes an upgrade holds still takes its own dump and restore.
        env.push(plain_env(
            "PGOPTIONS",
            crate::upgrade::hold::JOB_SESSION_OPTIONS,
        ));
    }
    Container {
        name: ENGINE.into(),
        command: Some(vec!["sh".into(), "-c".into(), script.to_owned()]),
        env: Some(env),
        // A failed restore's own error becomes the container's termination message.
        termination_message_policy: Some("FallbackToLogsOnError".into()),
        resources: Some(resources("100m", "128Mi", "1Gi")),
        ..engine_base(db, build)
    }
}

fn engine_base(db: &Database, build: &BuildConfig) -> Container {
    let uid = profile(db.spec.engine).uid;
    Container {
        image: Some(image(
            db.spec.engine,
            &db.spec.version,
            build.image_registry.as_deref(),
        )),
        image_pull_policy: Some("IfNotPresent".into()),
        volume_mounts: Some(vec![mount("stream", STREAM_DIR), mount("tmp", "/tmp")]),
        security_context: Some(restricted_as(uid)),
        ..Container::default()
    }
}

fn agent_container(inputs: &JobInputs<'_>, args: Vec<String>) -> Container {
    let mut env = Vec::new();
    let mut mounts = vec![mount("stream", STREAM_DIR), mount("tmp", "/tmp")];
    if let Some(s3) = &inputs.destination.s3 {
        env.push(plain_env(env::S3_ENDPOINT, &s3.endpoint));
        env.push(plain_env(env::S3_BUCKET, &s3.bucket));
        env.push(plain_env(
            env::S3_REGION,
            s3.region.as_deref().unwrap_or(DEFAULT_REGION),
        ));
        env.push(secret_env(
            env::S3_ACCESS_KEY_ID,
            &s3.credentials_secret,
            ACCESS_KEY_ID,
        ));
        env.push(secret_env(
            env::S3_SECRET_ACCESS_KEY,
            &s3.credentials_secret,
            SECRET_ACCESS_KEY,
        ));
        if s3.ca.is_some() {
            env.push(plain_env(env::S3_CA_FILE, &format!("{CA_DIR}/{CA_FILE}")));
            mounts.push(VolumeMount {
                read_only: Some(true),
                ..mount("ca", CA_DIR)
            });
        }
    }
    if inputs.destination.volume.is_some() {
        env.push(plain_env(env::VOLUME, VOLUME_MOUNT));
        mounts.push(mount("destination", VOLUME_MOUNT));
    }
    Container {
        name: AGENT.into(),
        image: Some(inputs.agent_image.to_owned()),
        image_pull_policy: Some("IfNotPresent".into()),
        command: Some(vec!["/backup-agent".into()]),
        args: Some(args),
        env: Some(env),
        volume_mounts: Some(mounts),
        resources: Some(resources("100m", "64Mi", "256Mi")),
        security_context: Some(restricted_as(AGENT_UID)),
        ..Container::default()
    }
}

fn resources(cpu: &str, memory: &str, memory_limit: &str) -> ResourceRequirements {
    ResourceRequirements {
        requests: Some(BTreeMap::from([
            ("cpu".to_owned(), Quantity(cpu.to_owned())),
            ("memory".to_owned(), Quantity(memory.to_owned())),
        ])),
        limits: Some(BTreeMap::from([(
            "memory".to_owned(),
            Quantity(memory_limit.to_owned()),
        )])),
        ..ResourceRequirements::default()
    }
}

fn mount(name: &str, path: &str) -> VolumeMount {
    VolumeMount {
        name: name.into(),
        mount_path: path.into(),
        ..VolumeMount::default()
    }
}

fn plain_env(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        value: Some(value.into()),
        ..EnvVar::default()
    }
}

fn secret_env(name: &str, secret: &str, key: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: secret.into(),
                key: key.into(),
                optional: Some(false),
            }),
            ..EnvVarSource::default()
        }),
        ..EnvVar::default()
    }
}

#[cfg(test)]
mod tests {
    use database_api::Engine;
    use database_api::backup::{S3Destination, SecretKey, VolumeDestination};

    use super::*;
    use crate::resources::fixtures::database;

    fn s3() -> BackupDestination {
        BackupDestination {
            s3: Some(S3Destination {
                endpoint: "https://s3.example.com".into(),
                bucket: "backups".into(),
                prefix: String::new(),
                region: None,
                credentials_secret: "backup-keys".into(),
                ca: Some(SecretKey {
                    name: "store-ca".into(),
                    key: "ca.crt".into(),
                }),
            }),
            volume: None,
        }
    }

    fn inputs<'a>(destination: &'a BackupDestination, build: &'a BuildConfig) -> JobInputs<'a> {
        JobInputs {
            name: "orders-nightly".into(),
            owner: None,
            namespace: "shop",
            database: "orders",
            destination,
            key: "shop/orders/orders-nightly.sql.gz",
            agent_image: "ghcr.io/mycompany/database-operator:0.1.0",
            build,
        }
    }

    fn spec(job: &Job) -> &PodSpec {
        job.spec
            .as_ref()
            .and_then(|s| s.template.spec.as_ref())
            .expect("a pod spec")
    }

    fn env_names(container: &Container) -> Vec<&str> {
        container
            .env
            .iter()
            .flatten()
            .map(|e| e.name.as_str())
            .collect()
    }

    #[test]
    fn a_backup_pairs_the_engines_dump_with_the_agent_at_a_pipe() {
        let db = database(Engine::Postgres, "17", 1);
        let build = BuildConfig::default();
        let destination = s3();
        let job = backup(&db, &inputs(&destination, &build));
        let pod = spec(&job);
        let init = pod
            .init_containers
            .as_ref()
            .expect("the pipe is made first");
        assert_eq!(
            init[0].command.as_deref(),
            Some(&["mkfifo".to_owned(), "-m".into(), "666".into(), PIPE.into()][..])
        );
        let [engine, agent] = &pod.containers[..] else {
            panic!("two containers: {:?}", pod.containers);
        };
        assert_eq!(engine.image.as_deref(), Some("postgres:17"));
        assert!(
            engine
                .command
                .iter()
                .flatten()
                .any(|c| c.contains("pg_dump"))
        );
        assert_eq!(agent.args.as_ref().map(|a| a[0].as_str()), Some("upload"));
        assert!(
            env_names(agent).contains(&env::S3_CA_FILE),
            "the destination's CA is trusted"
        );
        let job_spec = job.spec.as_ref().expect("spec");
        assert_eq!(job_spec.backoff_limit, Some(0));
        assert_eq!(pod.restart_policy.as_deref(), Some("Never"));
        assert_eq!(pod.automount_service_account_token, Some(false));
    }

    #[test]
    fn every_container_is_non_root_read_only_and_without_capabilities() {
        let db = database(Engine::Mysql, "8.4", 1);
        let build = BuildConfig::default();
        let destination = s3();
        for job in [
            backup(&db, &inputs(&destination, &build)),
            restore(&db, &inputs(&destination, &build)),
            delete(&inputs(&destination, &build)),
        ] {
            let pod = spec(&job);
            for container in pod
                .containers
                .iter()
                .chain(pod.init_containers.iter().flatten())
            {
                let sc = container
                    .security_context
                    .as_ref()
                    .expect("a security context");
                assert_eq!(
                    sc.read_only_root_filesystem,
                    Some(true),
                    "{}",
                    container.name
                );
                assert_eq!(sc.run_as_non_root, Some(true));
                assert_eq!(sc.allow_privilege_escalation, Some(false));
                assert_eq!(
                    sc.capabilities.as_ref().and_then(|c| c.drop.clone()),
                    Some(vec!["ALL".to_owned()])
                );
            }
        }
    }

    #[test]
    fn keys_and_passwords_come_from_secrets_never_from_the_spec() {
        let db = database(Engine::Postgres, "17", 1);
        let build = BuildConfig::default();
        let destination = s3();
        let job = backup(&db, &inputs(&destination, &build));
        let pod = spec(&job);
        for container in &pod.containers {
            for var in container.env.iter().flatten() {
                let secret = var
                    .value_from
                    .as_ref()
                    .and_then(|v| v.secret_key_ref.as_ref());
                if var.name.contains("PASSWORD") || var.name.contains("ACCESS_KEY") {
                    assert!(secret.is_some(), "{} is not read from a Secret", var.name);
                    assert_eq!(var.value, None);
                }
            }
        }
        let engine = &pod.containers[0];
        let password = engine
            .env
            .iter()
            .flatten()
            .find(|v| v.name == "DATABASE_PASSWORD")
            .and_then(|v| v.value_from.as_ref()?.secret_key_ref.as_ref())
            .expect("the password");
        assert_eq!(password.name, "orders-connection", "the application user's");
    }

    #[test]
    fn a_volume_destination_is_mounted_for_the_agent_writable_by_its_group() {
        let db = database(Engine::Postgres, "17", 1);
        let build = BuildConfig::default();
        let destination = BackupDestination {
            s3: None,
            volume: Some(VolumeDestination {
                claim_name: "dumps".into(),
                prefix: String::new(),
            }),
        };
        let job = backup(&db, &inputs(&destination, &build));
        let pod = spec(&job);
        assert_eq!(
            pod.security_context.as_ref().and_then(|s| s.fs_group),
            Some(AGENT_UID)
        );
        let agent = &pod.containers[1];
        assert!(env_names(agent).contains(&env::VOLUME));
        assert!(
            agent
                .volume_mounts
                .iter()
                .flatten()
                .any(|m| m.name == "destination" && m.mount_path == VOLUME_MOUNT)
        );
        let claim = pod
            .volumes
            .iter()
            .flatten()
            .find_map(|v| v.persistent_volume_claim.as_ref())
            .expect("the claim");
        assert_eq!(claim.claim_name, "dumps");
    }

    #[test]
    fn a_deletion_runs_the_agent_alone() {
        let build = BuildConfig::default();
        let destination = s3();
        let job = delete(&inputs(&destination, &build));
        let pod = spec(&job);
        assert_eq!(pod.containers.len(), 1);
        assert_eq!(pod.init_containers, None);
        assert_eq!(
            pod.containers[0].args.as_deref(),
            Some(
                &[
                    "delete".to_owned(),
                    "--key=shop/orders/orders-nightly.sql.gz".to_owned()
                ][..]
            )
        );
    }
}
