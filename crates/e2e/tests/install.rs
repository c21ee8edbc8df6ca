//! `deploy/default` against a real API server: it renders, a server-side dry-run
//! accepts every object, and the Pods it runs pass Pod Security `restricted`.

use database_api::{Database, DatabaseSpec, Engine};
use database_controller::resources::BuildConfig;
use database_controller::resources::credentials::Layout;
use database_controller::resources::statefulset::build_statefulset;
use e2e::{OPERATOR_NAMESPACE, of_kind, render_default};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use testenv::toolkit::cluster::create_object;
use testenv::toolkit::kubectl::{kubectl, kustomize};
use testenv::{ControlPlane, Options};

#[tokio::test]
async fn the_default_overlay_renders_and_a_server_side_dry_run_accepts_every_object() {
    let plane = ControlPlane::start(Options::default())
        .await
        .expect("control plane");
    let objects = render_default();
    for kind in [
        "CustomResourceDefinition",
        "Deployment",
        "ClusterRole",
        "Role",
        "ServiceAccount",
        "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration",
        "Service",
    ] {
        assert!(!of_kind(&objects, kind).is_empty(), "no {kind} rendered");
    }
    // A dry-run does not create the namespace, so the namespaced objects need it first.
    let client = plane.client().await.expect("client");
    create_object(&client, of_kind(&objects, "Namespace")[0]).await;
    let rendered = kustomize(&e2e::workspace_root().join("deploy/default"));
    let dry_run = ["apply", "--server-side", "--dry-run=server", "-f", "-"];
    let (ok, stdout, stderr) = kubectl(&plane, &dry_run, &rendered).await;
    assert!(ok, "dry-run refused:\n{stderr}");
    eprintln!("{stdout}{stderr}");
    assert_eq!(
        stdout
            .lines()
            .filter(|l| l.contains("(server dry run)"))
            .count(),
        objects.len(),
        "{stdout}"
    );
    assert!(
        !stderr.contains("Warning"),
        "the API server warned: {stderr}"
    );
}

/// A Pod with the template's spec, as a Deployment or Job would create it.
fn pod_from_template(name: &str, namespace: &str, template_spec: &Value) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": template_spec,
    }))
    .expect("Pod")
}

async fn dry_run_create(pods: &Api<Pod>, pod: &Pod) -> Result<(), String> {
    let params = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    pods.create(&params, pod)
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}

#[tokio::test]
async fn operator_and_database_pods_pass_pod_security_restricted() {
    let plane = ControlPlane::start(Options::default())
        .await
        .expect("control plane");
    let objects = render_default();
    let namespace = of_kind(&objects, "Namespace")[0];
    assert_eq!(
        namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"],
        "restricted"
    );
    let client = plane.client().await.expect("client");
    create_object(&client, namespace).await;
    let pods: Api<Pod> = Api::namespaced(client, OPERATOR_NAMESPACE);

    let mut checked = 0;
    for workload in of_kind(&objects, "Deployment")
        .into_iter()
        .chain(of_kind(&objects, "Job"))
    {
        let name = workload["metadata"]["name"].as_str().expect("name");
        let pod = pod_from_template(
            name,
            OPERATOR_NAMESPACE,
            &workload["spec"]["template"]["spec"],
        );
        dry_run_create(&pods, &pod)
            .await
            .unwrap_or_else(|e| panic!("{name} refused: {e}"));
        checked += 1;
    }
    assert_eq!(checked, 3, "controller, webhook and certificate Job");

    // The databases' own Pods, for every engine, in a restricted namespace.
    for engine in Engine::ALL {
        let mut db = Database::new("check", DatabaseSpec::new(engine, "8.0", "1Gi"));
        db.metadata.namespace = Some(OPERATOR_NAMESPACE.to_owned());
        let set = build_statefulset(&db, &BuildConfig::default(), "1Gi", Layout::SeparateAdmin);
        let mut template =
            serde_json::to_value(set.spec.expect("spec").template.spec).expect("json");
        // The StatefulSet controller adds the claim's volume to each Pod it creates.
        template["volumes"]
            .as_array_mut()
            .expect("volumes")
            .push(json!({"name": "data", "persistentVolumeClaim": {"claimName": "data-check-0"}}));
        let pod = pod_from_template(&format!("db-{engine}"), OPERATOR_NAMESPACE, &template);
        dry_run_create(&pods, &pod)
            .await
            .unwrap_or_else(|e| panic!("{engine} Pod refused: {e}"));
    }

    // The check can fail: a privileged Pod is refused in the same namespace.
    let privileged = pod_from_template(
        "privileged",
        OPERATOR_NAMESPACE,
        &json!({
            "containers": [{"name": "x", "image": "x", "securityContext": {"privileged": true}}],
        }),
    );
    let err = dry_run_create(&pods, &privileged)
        .await
        .expect_err("restricted refuses privileged Pods");
    assert!(err.contains("violates PodSecurity"), "{err}");
}
