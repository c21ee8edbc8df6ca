//! An object store for backups: versitygw over TLS on the node's address, with the
//! Secrets a destination names. For the tests of backups (with `mod common`).

use database_backup::s3::{Bucket, BucketConfig, Credentials};
use database_controller::context::Settings;
use k8s_openapi::api::core::v1::Secret;
use kube::api::PostParams;
use testenv::Options;
use testenv::images::OPERATOR_IMAGE;
use testenv::object_store::{NODE_ADDRESS, ObjectStore};
use testenv::toolkit::real_tier::enforce_restricted;

use crate::common::{Env, NAMESPACE, Setup};

/// The node with `images` (the operator's among them), the controller knowing its agent
/// image, and an object store the Pods reach, with its keys and CA in the Secrets
/// `backup-keys` and `store-ca`.
pub async fn start_with_store(images: &[&str]) -> (Env, ObjectStore) {
    let settings = Settings {
        backup_agent_image: Some(OPERATOR_IMAGE.to_owned()),
        ..Settings::default()
    };
    let env = Env::start(Setup {
        options: Options::real(images),
        settings,
    })
    .await;
    enforce_restricted(&env).await;
    let store = ObjectStore::start(NODE_ADDRESS)
        .await
        .expect("the object store starts");
    let secrets: kube::Api<Secret> = env.api();
    for secret in store.secrets(NAMESPACE) {
        secrets
            .create(&PostParams::default(), &secret)
            .await
            .expect("Secret created");
    }
    (env, store)
}

/// Creates bucket `name` through the S3 API, as an administrator of the store would.
pub async fn create_bucket(store: &ObjectStore, name: &str) {
    Bucket::new(BucketConfig {
        endpoint: store.endpoint.clone(),
        bucket: name.to_owned(),
        region: "us-east-1".to_owned(),
        credentials: Credentials {
            access_key_id: store.access_key_id.clone(),
            secret_access_key: store.secret_access_key.clone(),
        },
        ca_pem: Some(store.ca_pem.clone().into_bytes()),
    })
    .expect("a client")
    .create()
    .await
    .expect("bucket created");
}
