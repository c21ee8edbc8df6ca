//! The harness against itself: a real etcd and kube-apiserver start, answer, and stop.

use k8s_openapi::api::core::v1::Namespace;
use kube::Api;
use kube::api::ListParams;
use testenv::{ControlPlane, Options, assets};

#[tokio::test]
async fn control_plane_serves_the_pinned_kubernetes_version_and_stops_on_drop() {
    let plane = ControlPlane::start(Options::default())
        .await
        .expect("control plane starts");
    let client = plane.client().await.expect("admin client");

    let version = client.apiserver_version().await.expect("GET /version");
    eprintln!(
        "kube-apiserver {} at {}",
        version.git_version,
        plane.server()
    );
    assert_eq!(version.git_version, assets::KUBERNETES_VERSION);

    let namespaces: Api<Namespace> = Api::all(client);
    assert!(
        namespaces
            .get_opt("kube-system")
            .await
            .expect("list")
            .is_some()
    );

    let dir = plane.dir().to_path_buf();
    let server = plane.server().to_owned();
    drop(plane);

    assert!(
        !dir.exists(),
        "temporary directory {} left behind",
        dir.display()
    );
    let port = server
        .rsplit(':')
        .next()
        .and_then(|p| p.parse::<u16>().ok())
        .expect("port");
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
        "kube-apiserver still listening on {port} after drop"
    );
}

#[tokio::test]
async fn rbac_is_enforced_for_users_outside_system_masters() {
    let plane = ControlPlane::start(Options::default())
        .await
        .expect("control plane starts");
    let kubeconfig = plane.kubeconfig_for("nobody", &[]).expect("kubeconfig");
    let client = testenv::client_from(&kubeconfig).await.expect("client");
    let namespaces: Api<Namespace> = Api::all(client);
    let err = namespaces
        .list(&ListParams::default())
        .await
        .expect_err("RBAC denies");
    match err {
        kube::Error::Api(status) => assert_eq!(status.code, 403, "{status:?}"),
        other => panic!("expected 403, got {other}"),
    }
}
