//! RBAC proven by use: the controller runs with its ServiceAccount's token and only the
//! roles in `deploy/`, and does its whole job (leader election, create to Running,
//! scale, storage growth, deletion of data). The audit log then shows that every rule
//! of its ClusterRole was used, and that nothing it did was refused.

// The controller's whole job is one scenario, told in a few long steps.
#![allow(clippy::too_many_lines)]

use std::collections::BTreeSet;
use std::time::Duration;

use clap::Parser;
use database_api::backup::{BackupPhase, DatabaseBackup};
use database_api::{Database, Phase};
use database_controller::cli::Cli;
use e2e::{OPERATOR_NAMESPACE, of_kind, render_default};
use futures::FutureExt;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, Secret, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::discovery::{Discovery, Scope};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use testenv::toolkit::Wait;
use testenv::toolkit::cluster::service_account_kubeconfig;
use testenv::toolkit::fixtures;
use testenv::toolkit::operator::controller_args;
use testenv::{ControlPlane, Options};

const CONTROLLER_SA: &str = "database-operator-controller";

/// Applies the rendered objects, except the kinds in `skip` (the workloads, whose Pods
/// would be kwok fakes, and where no webhook runs, its configurations).
async fn install(client: &Client, objects: &[Value], skip: &[&str]) {
    let discovery = Discovery::new(client.clone())
        .run()
        .await
        .expect("discovery");
    for object in objects
        .iter()
        .filter(|o| !skip.contains(&o["kind"].as_str().unwrap_or("")))
    {
        let (group, version) = match object["apiVersion"].as_str().unwrap_or("").split_once('/') {
            Some((g, v)) => (g.to_owned(), v.to_owned()),
            None => (
                String::new(),
                object["apiVersion"].as_str().unwrap_or("").to_owned(),
            ),
        };
        let kind = object["kind"].as_str().unwrap_or("");
        let (resource, caps) = discovery
            .groups()
            .filter(|g| g.name() == group)
            .flat_map(|g| g.versioned_resources(&version))
            .find(|(r, _)| r.kind == kind)
            .expect("every rendered kind is served");
        let api: Api<DynamicObject> = match caps.scope {
            Scope::Namespaced => Api::namespaced_with(
                client.clone(),
                object["metadata"]["namespace"]
                    .as_str()
                    .unwrap_or("default"),
                &resource,
            ),
            Scope::Cluster => Api::all_with(client.clone(), &resource),
        };
        let dynamic: DynamicObject = serde_json::from_value(object.clone()).expect("object");
        api.patch(
            &dynamic.name_any(),
            &PatchParams::apply("e2e").force(),
            &Patch::Apply(&dynamic),
        )
        .await
        .expect("applied");
        if kind == "CustomResourceDefinition" {
            // Let the new resource be served before anything uses it.
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
    }
}

/// Polls `check` every 200 ms until it holds, for at most `timeout`.
async fn wait<F, Fut>(what: &str, timeout: Duration, check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    Wait::new(what, timeout)
        .every(Duration::from_millis(200))
        .until(check)
        .await;
}

async fn phase(api: &Api<Database>, name: &str) -> Option<Phase> {
    api.get_opt(name)
        .await
        .ok()
        .flatten()?
        .status
        .map(|s| s.phase)
}

/// (group, resource[/subresource], verb) of every request `user` made, and those refused.
fn used_permissions(
    plane: &ControlPlane,
    user: &str,
) -> (BTreeSet<(String, String, String)>, Vec<String>) {
    let mut permissions = BTreeSet::new();
    let mut refused = Vec::new();
    for event in &plane.requests_by(user) {
        let object = &event["objectRef"];
        let mut resource = object["resource"].as_str().unwrap_or("").to_owned();
        if let Some(sub) = object["subresource"].as_str() {
            resource = format!("{resource}/{sub}");
        }
        let permission = (
            object["apiGroup"].as_str().unwrap_or("").to_owned(),
            resource,
            event["verb"].as_str().unwrap_or("").to_owned(),
        );
        if event["responseStatus"]["code"] == 403 {
            refused.push(format!("{permission:?}"));
        }
        // A server-side apply that creates the object is authorized as patch and create.
        if permission.2 == "patch" && event["responseStatus"]["code"] == 201 {
            permissions.insert((
                permission.0.clone(),
                permission.1.clone(),
                "create".to_owned(),
            ));
        }
        permissions.insert(permission);
    }
    (permissions, refused)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controller_does_its_whole_job_with_only_the_deployed_rbac() {
    // OwnerReferencesPermissionEnforcement is what makes the databases/finalizers rule
    // necessary (blockOwnerDeletion on owner references); turn it on as hardened clusters do.
    // On a real node: replication (exec into the instances, role labels, a fenced old
    // primary) is part of the job.
    let mut options = Options::real(&["postgres-17", "operator"]).with_full_audit();
    options
        .apiserver_args
        .push("--enable-admission-plugins=OwnerReferencesPermissionEnforcement".to_owned());
    let plane = ControlPlane::start(options).await.expect("control plane");
    let client = plane.client().await.expect("admin client");
    let objects = render_default();
    install(
        &client,
        &objects,
        &[
            "Deployment",
            "Job",
            "ValidatingWebhookConfiguration",
            "MutatingWebhookConfiguration",
        ],
    )
    .await;

    let kubeconfig = service_account_kubeconfig(&plane, OPERATOR_NAMESPACE, CONTROLLER_SA).await;
    let mut args = controller_args(&kubeconfig);
    args.extend(
        [
            "--leader-elect",
            "--leader-election-namespace",
            OPERATOR_NAMESPACE,
            "--backup-agent-image",
            testenv::images::OPERATOR_IMAGE,
        ]
        .map(str::to_owned),
    );
    let cli = Cli::parse_from(std::iter::once("controller".to_owned()).chain(args));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let controller = tokio::spawn(database_controller::app::run(cli, stopped.map(|_| ())));

    let dbs: Api<Database> = Api::namespaced(client.clone(), "default");
    let db = fixtures::database(
        "rbac",
        &json!({"engine": "postgres", "version": "17", "storage": "1Gi", "replicas": 2, "deletionPolicy": "Delete"}),
    );
    dbs.create(&PostParams::default(), &db)
        .await
        .expect("created");
    let user = format!("system:serviceaccount:{OPERATOR_NAMESPACE}:{CONTROLLER_SA}");
    let running = Wait::new("rbac Running", Duration::from_secs(180))
        .every(Duration::from_millis(200))
        .poll(|| async {
            match dbs
                .get_opt("rbac")
                .await
                .ok()
                .flatten()
                .and_then(|d| d.status)
            {
                Some(status) if status.phase == Phase::Running => Ok(()),
                status => Err(status),
            }
        })
        .await;
    // What was refused is what keeps a controller with too little RBAC from Running.
    assert!(
        running.is_ok(),
        "not Running: {:?}\nrefused: {:#?}",
        running.err().flatten(),
        used_permissions(&plane, &user).1
    );

    binding_controllers_read_the_binding(&plane, &client).await;
    switch_over(&dbs).await;
    hand_edits_are_put_back(&client).await;
    backups_retention_and_restore(&client, &dbs).await;
    grow_scale_and_delete(&client, &dbs).await;

    let _ = stop.send(());
    let result = tokio::time::timeout(Duration::from_secs(20), controller)
        .await
        .expect("stops")
        .expect("joins");
    assert!(result.is_ok(), "controller: {result:?}");

    let (permissions, refused) = used_permissions(&plane, &user);
    assert!(refused.is_empty(), "refused: {refused:#?}");
    assert_every_rule_used(&objects, &permissions);
}

/// A Service Binding controller's ClusterRole aggregates every ClusterRole labelled
/// `servicebinding.io/controller`; with it, the controller's ServiceAccount reads the
/// Database's `status.binding`.
async fn binding_controllers_read_the_binding(plane: &ControlPlane, client: &Client) {
    let account = "servicebinding-controller";
    let objects = [
        json!({"apiVersion": "v1", "kind": "ServiceAccount",
               "metadata": {"name": account, "namespace": "default"}}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": account},
               "aggregationRule": {"clusterRoleSelectors": [
                   {"matchLabels": {"servicebinding.io/controller": "true"}}]},
               "rules": []}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": account},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": account},
               "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": "default"}]}),
    ];
    install(client, &objects, &[]).await;
    let kubeconfig = service_account_kubeconfig(plane, "default", account).await;
    let binding_client = testenv::client_from(&kubeconfig).await.expect("client");
    let dbs: Api<Database> = Api::namespaced(binding_client, "default");
    let binding = Wait::new(
        "the binding read as a binding controller",
        Duration::from_secs(60),
    )
    .every(Duration::from_millis(500))
    .poll(|| async {
        match dbs.get("rbac").await {
            Ok(db) => match db.status.and_then(|s| s.binding) {
                Some(binding) => Ok(binding.name),
                None => Err("no status.binding".to_owned()),
            },
            Err(error) => Err(error.to_string()),
        }
    })
    .await;
    assert_eq!(binding.as_deref(), Ok("rbac-connection"));
}

/// Fails on a wildcard, or on a rule of the controller's ClusterRole no request used.
fn assert_every_rule_used(objects: &[Value], used: &BTreeSet<(String, String, String)>) {
    let role = of_kind(objects, "ClusterRole")
        .into_iter()
        .find(|r| r["metadata"]["name"] == CONTROLLER_SA)
        .expect("controller ClusterRole");
    let mut unused = Vec::new();
    for rule in role["rules"].as_array().expect("rules") {
        for group in rule["apiGroups"]
            .as_array()
            .expect("groups")
            .iter()
            .filter_map(Value::as_str)
        {
            assert_ne!(group, "*", "wildcard group in {rule}");
            for resource in rule["resources"]
                .as_array()
                .expect("resources")
                .iter()
                .filter_map(Value::as_str)
            {
                assert_ne!(resource, "*", "wildcard resource in {rule}");
                for verb in rule["verbs"]
                    .as_array()
                    .expect("verbs")
                    .iter()
                    .filter_map(Value::as_str)
                {
                    assert_ne!(verb, "*", "wildcard verb in {rule}");
                    // Checked inside admission, never a request of its own: proven by the
                    // owner references the controller set with the plugin enabled.
                    if resource == "databases/finalizers"
                        || resource == "databasebackups/finalizers"
                    {
                        continue;
                    }
                    // The WebSocket exec is audited as get; create is the second check
                    // the API server makes on that same request.
                    if resource == "pods/exec" && verb == "create" {
                        continue;
                    }
                    if !used.contains(&(group.to_owned(), resource.to_owned(), verb.to_owned())) {
                        unused.push(format!("{group}/{resource} {verb}"));
                    }
                }
            }
        }
    }
    assert!(
        unused.is_empty(),
        "rules nothing used: {unused:#?}\nused: {used:#?}"
    );
}

/// A switchover to the second instance: the controller asks the instances through exec,
/// names the new primary in the topology ConfigMap, moves the role labels and deletes
/// the old primary's Pod.
async fn switch_over(dbs: &Api<Database>) {
    let primary = |db: Option<Database>| db.and_then(|d| d.status).and_then(|s| s.primary);
    Wait::new("rbac replicated", Duration::from_secs(180))
        .every(Duration::from_millis(200))
        .until_ok(|| async {
            let status = dbs
                .get_opt("rbac")
                .await
                .ok()
                .flatten()
                .and_then(|d| d.status);
            let replicated = status.as_ref().is_some_and(|s| {
                s.conditions
                    .iter()
                    .any(|c| c.type_ == "Replicated" && c.status == "True")
            });
            if replicated {
                Ok(())
            } else {
                Err(format!("status {status:#?}"))
            }
        })
        .await;
    dbs.patch(
        "rbac",
        &PatchParams::default(),
        &Patch::Merge(
            json!({"metadata": {"annotations": {"mycompany.io/switchover-to": "rbac-1"}}}),
        ),
    )
    .await
    .expect("switchover asked");
    wait("switched over", Duration::from_secs(180), || async {
        primary(dbs.get_opt("rbac").await.ok().flatten()).as_deref() == Some("rbac-1")
    })
    .await;
}

/// Owned objects the controller created are edited by hand; it patches each back.
async fn hand_edits_are_put_back(client: &Client) {
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), "default");
    let edit = PatchParams::default();
    services
        .patch(
            "rbac",
            &edit,
            &Patch::Merge(json!({"spec": {"publishNotReadyAddresses": false}})),
        )
        .await
        .expect("Service edited");
    secrets
        .patch(
            "rbac-connection",
            &edit,
            &Patch::Merge(json!({"stringData": {"host": "elsewhere"}})),
        )
        .await
        .expect("Secret edited");
    budgets
        .patch(
            "rbac",
            &edit,
            &Patch::Merge(json!({"spec": {"maxUnavailable": 2}})),
        )
        .await
        .expect("budget edited");
    wait("hand edits put back", Duration::from_secs(60), || async {
        let service = services.get("rbac").await.ok();
        let secret = secrets.get("rbac-connection").await.ok();
        let budget = budgets.get("rbac").await.ok();
        let host = secret
            .and_then(|s| s.data)
            .and_then(|d| d.get("host").map(|h| h.0.clone()));
        service.and_then(|s| s.spec?.publish_not_ready_addresses) == Some(true)
            && host.is_some_and(|h| h != b"elsewhere")
            && budget.and_then(|b| b.spec?.max_unavailable) == Some(IntOrString::Int(1))
    })
    .await;
}

/// Backups to a volume, real dumps of the real server: one made by hand and labelled as
/// the schedule's, then a schedule every minute keeping one, whose first backup lets
/// the hand-made one go (its dump deleted by a Job); a new Database restored from the
/// scheduled backup.
async fn backups_retention_and_restore(client: &Client, dbs: &Api<Database>) {
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), "default");
    let claim: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": {"name": "dumps"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }))
    .expect("claim");
    claims
        .create(&PostParams::default(), &claim)
        .await
        .expect("claim created");
    let destination = json!({"volume": {"claimName": "dumps"}});
    let backups: Api<DatabaseBackup> = Api::namespaced(client.clone(), "default");
    let mut old = fixtures::database_backup("rbac-old", "rbac", Some(&destination));
    // Labelled as the schedule labels its own, so that its retention counts it.
    old.metadata.labels = Some(
        [
            ("mycompany.io/database", "rbac"),
            ("mycompany.io/scheduled", "true"),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .into(),
    );
    backups
        .create(&PostParams::default(), &old)
        .await
        .expect("backup created");
    let succeeded = |backup: &DatabaseBackup| {
        backup
            .status
            .as_ref()
            .is_some_and(|s| s.phase == BackupPhase::Succeeded)
    };
    Wait::new("the hand-made backup succeeded", Duration::from_secs(180))
        .every(Duration::from_millis(500))
        .until_ok(|| async {
            match backups.get("rbac-old").await {
                Ok(backup) if succeeded(&backup) => Ok(()),
                read => Err(format!("status {:#?}", read.ok().and_then(|b| b.status))),
            }
        })
        .await;
    dbs.patch(
        "rbac",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"backup": {
            "schedule": "* * * * *", "retention": {"count": 1}, "destination": destination,
        }}})),
    )
    .await
    .expect("schedule set");
    wait("the retention", Duration::from_secs(240), || async {
        let list = backups.list(&ListParams::default()).await.ok();
        list.is_some_and(|l| {
            l.items.len() == 1
                && l.items.iter().all(succeeded)
                && l.items[0].name_any() != "rbac-old"
        })
    })
    .await;
    dbs.patch(
        "rbac",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"backup": {"suspend": true}}})),
    )
    .await
    .expect("schedule suspended");
    let scheduled = backups
        .list(&ListParams::default())
        .await
        .expect("backups")
        .items
        .into_iter()
        .find(succeeded)
        .expect("the scheduled backup");
    restore_a_copy(dbs, &backups, &scheduled.name_any()).await;
}

/// A new Database from the backup `name`, Running once restored; then it and the
/// backup (and its dump) are deleted.
async fn restore_a_copy(dbs: &Api<Database>, backups: &Api<DatabaseBackup>, name: &str) {
    let copy = fixtures::database(
        "rbac-copy",
        &json!({"engine": "postgres", "version": "17", "storage": "1Gi", "deletionPolicy": "Delete",
                "restoreFrom": {"backup": name}}),
    );
    dbs.create(&PostParams::default(), &copy)
        .await
        .expect("copy created");
    wait("the copy restored", Duration::from_secs(240), || async {
        phase(dbs, "rbac-copy").await == Some(Phase::Running)
    })
    .await;
    dbs.delete("rbac-copy", &DeleteParams::default())
        .await
        .expect("copy deleted");
    backups
        .delete(name, &DeleteParams::default())
        .await
        .expect("backup deleted");
    wait(
        "the copy and the backup gone",
        Duration::from_secs(120),
        || async {
            dbs.get_opt("rbac-copy").await.ok().flatten().is_none()
                && backups
                    .list(&ListParams::default())
                    .await
                    .is_ok_and(|l| l.items.is_empty())
        },
    )
    .await;
}

/// Storage growth (claims patched, StatefulSet orphan-deleted and recreated), a scale
/// down to one instance (budget deleted), and deletion with deletionPolicy Delete.
async fn grow_scale_and_delete(client: &Client, dbs: &Api<Database>) {
    // Grow storage (claims patched, StatefulSet orphan-deleted and recreated), then scale
    // back to one (the PodDisruptionBudget is deleted).
    dbs.patch(
        "rbac",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"storage": "2Gi"}})),
    )
    .await
    .expect("grown");
    let sets: Api<StatefulSet> = Api::namespaced(client.clone(), "default");
    wait(
        "StatefulSet recreated with 2Gi",
        Duration::from_secs(90),
        || async {
            let set = sets.get_opt("rbac").await.ok().flatten();
            let size = set.and_then(|s| {
                s.spec?
                    .volume_claim_templates?
                    .into_iter()
                    .next()?
                    .spec?
                    .resources?
                    .requests?
                    .get("storage")
                    .map(|q| q.0.clone())
            });
            size.as_deref() == Some("2Gi")
        },
    )
    .await;
    // Scale back to one with engine settings: the configuration ConfigMap is written and
    // the setting applied in the running server; without settings the ConfigMap goes.
    dbs.patch(
        "rbac",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 1, "parameters": {"work_mem": "8MB"}}})),
    )
    .await
    .expect("scaled");
    wait(
        "Running with 1 replica and the settings applied",
        Duration::from_secs(240),
        || async {
            let db = dbs.get_opt("rbac").await.ok().flatten();
            db.and_then(|d| d.status).is_some_and(|s| {
                s.phase == Phase::Running && s.replicas == 1 && s.parameters_revision.is_some()
            })
        },
    )
    .await;
    dbs.patch(
        "rbac",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"parameters": null}})),
    )
    .await
    .expect("settings removed");
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    wait(
        "the settings ConfigMap deleted",
        Duration::from_secs(60),
        || async {
            configmaps
                .get_opt("rbac-config")
                .await
                .ok()
                .flatten()
                .is_none()
        },
    )
    .await;
    dbs.delete("rbac", &DeleteParams::default())
        .await
        .expect("delete accepted");
    wait("Database gone", Duration::from_secs(60), || async {
        dbs.get_opt("rbac").await.ok().flatten().is_none()
    })
    .await;
}

#[tokio::test]
async fn the_webhook_certificate_bootstrap_works_with_only_the_deployed_rbac() {
    let plane = ControlPlane::start(Options::default().with_full_audit())
        .await
        .expect("control plane");
    let client = plane.client().await.expect("admin client");
    let objects = render_default();
    install(&client, &objects, &["Deployment", "Job"]).await;
    let job = of_kind(&objects, "Job")[0];
    let args: Vec<&str> = job["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .expect("args")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let flag = |name: &str| {
        args.iter()
            .find_map(|a| a.strip_prefix(&format!("--{name}=")))
            .expect("flag in the Job")
            .to_owned()
    };
    let options = database_webhook::certs::BootstrapOptions {
        namespace: OPERATOR_NAMESPACE.to_owned(),
        service: flag("service"),
        secret: flag("secret"),
        validating_config: flag("validating-config"),
        mutating_config: flag("mutating-config"),
    };
    let kubeconfig =
        service_account_kubeconfig(&plane, OPERATOR_NAMESPACE, "database-operator-webhook").await;
    let webhook_client = testenv::client_from(&kubeconfig).await.expect("client");
    database_webhook::certs::bootstrap(&webhook_client, &options)
        .await
        .expect("bootstrap as the webhook's ServiceAccount");
    database_webhook::certs::bootstrap(&webhook_client, &options)
        .await
        .expect("a second run reuses the Secret");

    let validating: Api<
        k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration,
    > = Api::all(client.clone());
    let config = validating
        .get(&options.validating_config)
        .await
        .expect("configuration");
    let bundle = config
        .webhooks
        .unwrap_or_default()
        .first()
        .and_then(|w| w.client_config.ca_bundle.clone());
    assert!(
        bundle.is_some_and(|b| String::from_utf8_lossy(&b.0).contains("BEGIN CERTIFICATE")),
        "caBundle written"
    );
    let user = format!("system:serviceaccount:{OPERATOR_NAMESPACE}:database-operator-webhook");
    let (_, refused) = used_permissions(&plane, &user);
    assert!(refused.is_empty(), "refused: {refused:#?}");
}
