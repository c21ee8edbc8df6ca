//! The agent's stores against a real S3-compatible server (versitygw, over TLS with
//! its own CA): a dump streamed in parts and read back whole, a failed dump leaving no
//! object, a missing bucket refused by name, deletion.

use database_backup::s3::{Bucket, BucketConfig, Credentials};
use database_backup::store::{Error, Store};
use testenv::object_store::ObjectStore;
use testenv::toolkit::buffer::SharedBuffer;

const BUCKET: &str = "backups";

fn store_and_bucket(server: &ObjectStore, bucket: &str) -> Bucket {
    Bucket::new(BucketConfig {
        endpoint: server.endpoint.clone(),
        bucket: bucket.to_owned(),
        region: "us-east-1".to_owned(),
        credentials: Credentials {
            access_key_id: server.access_key_id.clone(),
            secret_access_key: server.secret_access_key.clone(),
        },
        ca_pem: Some(server.ca_pem.clone().into_bytes()),
    })
    .expect("a client")
}

/// Rows much like a SQL dump's, `bytes` long.
fn dump_like(bytes: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes + 100);
    let mut n = 0u64;
    while out.len() < bytes {
        n = n
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        out.extend_from_slice(
            format!(
                "INSERT INTO orders VALUES ({}, 'customer-{}', {});\n",
                n >> 40,
                n % 9973,
                n % 100_000
            )
            .as_bytes(),
        );
    }
    out.truncate(bytes);
    out
}

#[tokio::test]
async fn a_dump_of_several_parts_is_stored_and_read_back_whole() {
    let server = ObjectStore::start("127.0.0.1")
        .await
        .expect("the object store");
    let bucket = store_and_bucket(&server, BUCKET);
    bucket.create().await.expect("bucket created");
    let store = Store::S3(Box::new(bucket.clone()));
    // Random-looking rows compress about 3:1; 120 MiB makes several 16 MiB parts.
    let data = dump_like(120 << 20);
    let key = "shop/orders/20261205T010000Z.sql.gz";
    let written = store
        .upload(key, std::io::Cursor::new(data.clone()), async { Ok(()) })
        .await
        .expect("uploaded");
    assert_eq!(written.source_bytes, data.len() as u64);
    assert!(
        written.stored_bytes > 16 << 20,
        "the test needs more than one part: {written:?}"
    );
    assert_eq!(
        bucket.size(key).await.expect("looked up"),
        Some(written.stored_bytes)
    );
    assert_eq!(server.keys(BUCKET), [key]);

    let collected = SharedBuffer::default();
    let read = store
        .download(key, collected.clone())
        .await
        .expect("downloaded");
    assert_eq!(read, data.len() as u64);
    assert!(collected.contents() == data, "the dump came back altered");

    store.delete(key).await.expect("deleted");
    assert_eq!(bucket.size(key).await.expect("looked up"), None);
    store
        .delete(key)
        .await
        .expect("deleting it again is no error");
}

#[tokio::test]
async fn a_failed_dump_leaves_no_object() {
    let server = ObjectStore::start("127.0.0.1")
        .await
        .expect("the object store");
    let bucket = store_and_bucket(&server, BUCKET);
    bucket.create().await.expect("bucket created");
    let store = Store::S3(Box::new(bucket.clone()));
    let key = "shop/orders/failed.sql.gz";
    let err = store
        .upload(key, std::io::Cursor::new(dump_like(20 << 20)), async {
            Err("the dump command exited with status 1: pg_dump: error: query failed".to_owned())
        })
        .await
        .expect_err("the dump failed");
    assert!(matches!(err, Error::Producer(_)), "{err}");
    assert!(err.to_string().contains("query failed"), "{err}");
    assert_eq!(bucket.size(key).await.expect("looked up"), None);
    assert_eq!(server.keys(BUCKET), Vec::<String>::new());
}

#[tokio::test]
async fn a_missing_bucket_is_refused_by_name_and_wrong_keys_are_refused() {
    let server = ObjectStore::start("127.0.0.1")
        .await
        .expect("the object store");
    let missing = Store::S3(Box::new(store_and_bucket(&server, "no-such-bucket")));
    let err = missing
        .upload(
            "shop/x.sql.gz",
            std::io::Cursor::new(b"SELECT 1;".to_vec()),
            async { Ok(()) },
        )
        .await
        .expect_err("no bucket");
    let text = err.to_string();
    assert!(
        text.contains("NoSuchBucket") && text.contains("s3://no-such-bucket/shop/x.sql.gz"),
        "{text}"
    );

    let wrong_secret = Bucket::new(BucketConfig {
        endpoint: server.endpoint.clone(),
        bucket: BUCKET.to_owned(),
        region: "us-east-1".to_owned(),
        credentials: Credentials {
            access_key_id: server.access_key_id.clone(),
            secret_access_key: "not-the-secret".to_owned(),
        },
        ca_pem: Some(server.ca_pem.clone().into_bytes()),
    })
    .expect("a client");
    let refused = wrong_secret.create().await.expect_err("bad signature");
    assert!(refused.code() == Some("SignatureDoesNotMatch"), "{refused}");
}

#[tokio::test]
async fn a_store_whose_certificate_is_not_trusted_is_not_spoken_to() {
    let server = ObjectStore::start("127.0.0.1")
        .await
        .expect("the object store");
    let untrusted = Bucket::new(BucketConfig {
        endpoint: server.endpoint.clone(),
        bucket: BUCKET.to_owned(),
        region: "us-east-1".to_owned(),
        credentials: Credentials {
            access_key_id: server.access_key_id.clone(),
            secret_access_key: server.secret_access_key.clone(),
        },
        ca_pem: None,
    })
    .expect("a client");
    let err = untrusted.create().await.expect_err("untrusted certificate");
    assert!(err.to_string().contains("certificate"), "{err}");
}
