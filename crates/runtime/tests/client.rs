//! The API client against a real API server: HTTP/2 is negotiated, and
//! the whole stack (auth, base URI, rate limit) serves concurrent requests on it.

use http::{Request, StatusCode, Version};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, PostParams};
use kube::client::Body;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Config, ResourceExt};
use operator_runtime::client;
use operator_runtime::ratelimit::RateLimitLayer;
use serde_json::json;
use testenv::{ControlPlane, Options};

/// A control plane and the client configuration its admin kubeconfig gives.
async fn start() -> (ControlPlane, Config) {
    let plane = ControlPlane::start(Options::default())
        .await
        .expect("control plane starts");
    let kubeconfig = Kubeconfig::read_from(plane.kubeconfig()).expect("kubeconfig reads");
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("config from kubeconfig");
    (plane, config)
}

#[tokio::test]
async fn the_api_server_is_spoken_to_over_http2() {
    let (_plane, config) = start().await;
    let http = client::http_client(&config).expect("HTTP client");
    let url = format!(
        "{}/version",
        config.cluster_url.to_string().trim_end_matches('/')
    );
    let request = Request::get(url)
        .body(Body::empty())
        .expect("request builds");
    let response = http.request(request).await.expect("GET /version answers");
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.version(), Version::HTTP_2);
}

#[tokio::test]
async fn the_client_stack_serves_concurrent_reads_and_writes() {
    let (_plane, config) = start().await;
    let client = client::build(config, &RateLimitLayer::new(1000.0, 2000)).expect("client");
    let maps: Api<ConfigMap> = Api::namespaced(client, "default");
    let creates = (0..64).map(|i| {
        let maps = maps.clone();
        async move {
            let map: ConfigMap = serde_json::from_value(json!({
                "metadata": {"name": format!("m{i}")},
                "data": {"i": i.to_string()},
            }))
            .expect("config map");
            maps.create(&PostParams::default(), &map).await
        }
    });
    let results = futures::future::join_all(creates).await;
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    let listed = maps.list(&ListParams::default()).await.expect("list");
    let mut names: Vec<String> = listed.items.iter().map(ResourceExt::name_any).collect();
    names.retain(|n| n.starts_with('m'));
    assert_eq!(names.len(), 64);
    let read = maps.get("m7").await.expect("get");
    assert_eq!(
        read.data.and_then(|d| d.get("i").cloned()).as_deref(),
        Some("7")
    );
}
