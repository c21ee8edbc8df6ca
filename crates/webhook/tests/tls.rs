//! The webhook over real TLS on loopback: protocol versions, ALPN, status codes,
//! certificate rotation under load, and a latency measurement.

// Each client and what the server does to it are one scenario, told in one function.
#![allow(clippy::too_many_lines)]

mod common;

use std::time::{Duration, Instant};

use common::Webhook;
use database_webhook::{MAX_BODY_BYTES, MUTATE_PATH, VALIDATE_PATH};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject as _;
use serde_json::json;
use testenv::https::{Connection, TlsClient, admission_review as review};

/// The DER of the first certificate in `pem`.
fn der_of(pem: &str) -> Vec<u8> {
    CertificateDer::pem_slice_iter(pem.as_bytes())
        .next()
        .expect("a certificate")
        .expect("PEM")
        .to_vec()
}

fn valid_spec() -> serde_json::Value {
    json!({"engine": "postgres", "version": "16.4", "storage": "10Gi"})
}

async fn connect(webhook: &Webhook) -> Connection {
    TlsClient::new(webhook.ca.cert_pem())
        .expect("client")
        .connect(webhook.addr)
        .await
        .expect("TLS connection")
}

#[tokio::test]
async fn reviews_are_answered_over_tls_1_3_and_tls_1_2() {
    let webhook = Webhook::start();
    for (version, expected) in [
        (&rustls::version::TLS13, rustls::ProtocolVersion::TLSv1_3),
        (&rustls::version::TLS12, rustls::ProtocolVersion::TLSv1_2),
    ] {
        let mut connection = TlsClient::with_versions(webhook.ca.cert_pem(), &[version])
            .expect("client")
            .connect(webhook.addr)
            .await
            .expect("handshake");
        assert_eq!(connection.version, Some(expected));
        let (status, answer) = connection
            .review(VALIDATE_PATH, &review("a1", "CREATE", &valid_spec()))
            .await
            .expect("answer");
        assert_eq!(status, 200);
        assert_eq!(answer["response"]["uid"], "a1");
        assert_eq!(answer["response"]["allowed"], true);
    }
}

/// What `openssl s_client` made of a handshake with the webhook: whether it succeeded
/// and what it printed. `None` when openssl is not installed.
async fn s_client(webhook: &Webhook, args: &[&str]) -> Option<(bool, String)> {
    // tokio's Command, so the server keeps running on this test's runtime meanwhile.
    let output = tokio::process::Command::new("openssl")
        .arg("s_client")
        .args(args)
        .arg("-connect")
        .arg(webhook.addr.to_string())
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .ok()?;
    Some((
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
    ))
}

/// Security level 0 lets the client really offer old protocols and weak suites (the
/// distribution's default level would refuse them before anything is sent).
const ANY_CIPHER: &str = "ALL:@SECLEVEL=0";

/// Suites without forward secrecy or without AEAD: static-RSA key exchange, CBC, 3DES,
/// RC4 and NULL, the ones scanners flag.
const WEAK_CIPHERS: &str = "AES128-SHA:AES256-SHA:AES128-SHA256:AES128-GCM-SHA256:AES256-GCM-SHA384:\
DES-CBC3-SHA:RC4-SHA:NULL-SHA256:ECDHE-RSA-AES128-SHA:ECDHE-ECDSA-AES128-SHA:\
ECDHE-RSA-AES256-SHA384:ECDHE-ECDSA-AES256-SHA384:ECDHE-RSA-DES-CBC3-SHA:@SECLEVEL=0";

const STRONG_CIPHERS: &str = "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:\
ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";

#[tokio::test]
async fn clients_offering_tls_1_0_or_1_1_are_refused() {
    let webhook = Webhook::start();
    // The same client with TLS 1.2 gets through, so a refusal below is the server's.
    let Some((ok, stdout)) = s_client(&webhook, &["-tls1_2", "-cipher", ANY_CIPHER]).await else {
        eprintln!("openssl is not installed; the server config test covers the versions");
        return;
    };
    assert!(
        ok && stdout.contains("Protocol  : TLSv1.2"),
        "TLS 1.2 failed: {stdout}"
    );
    for version in ["-tls1", "-tls1_1"] {
        let (ok, stdout) = s_client(&webhook, &[version, "-cipher", ANY_CIPHER])
            .await
            .expect("openssl ran before");
        assert!(!ok, "{version} handshake succeeded: {stdout}");
        // The server sending no certificate is what shows that no session was made.
        assert!(
            stdout.contains("no peer certificate available"),
            "a {version} session was made: {stdout}"
        );
    }
}

#[tokio::test]
async fn clients_offering_only_weak_tls_1_2_ciphers_are_refused() {
    let webhook = Webhook::start();
    let Some((ok, stdout)) = s_client(&webhook, &["-tls1_2", "-cipher", STRONG_CIPHERS]).await
    else {
        eprintln!("openssl is not installed; rustls offers no weak suite to test");
        return;
    };
    assert!(
        ok && stdout.contains("Cipher is ECDHE-"),
        "strong suites failed: {stdout}"
    );
    let (ok, stdout) = s_client(&webhook, &["-tls1_2", "-cipher", WEAK_CIPHERS])
        .await
        .expect("openssl ran before");
    assert!(!ok, "a weak suite was accepted: {stdout}");
    assert!(
        stdout.contains("no peer certificate available"),
        "a session was made with a weak suite: {stdout}"
    );
}

#[tokio::test]
async fn a_client_offering_only_h2_is_refused_because_the_server_speaks_http_1_1() {
    let webhook = Webhook::start();
    let client = TlsClient::with_config(
        webhook.ca.cert_pem(),
        &[&rustls::version::TLS13],
        vec![b"h2".to_vec()],
    )
    .expect("client");
    assert!(client.connect(webhook.addr).await.is_err());
}

#[tokio::test]
async fn bad_requests_over_tls_get_400_and_413() {
    let webhook = Webhook::start();
    let mut connection = connect(&webhook).await;
    let good = serde_json::to_vec(&review("b1", "CREATE", &valid_spec())).expect("json");
    let cases: [(Option<&str>, Vec<u8>, u16); 5] = [
        (Some("application/json"), Vec::new(), 400),
        (Some("text/plain"), good.clone(), 400),
        (None, good.clone(), 400),
        (Some("application/json"), b"{\"apiVersion\":".to_vec(), 400),
        (
            Some("application/json"),
            vec![b' '; MAX_BODY_BYTES + 1],
            413,
        ),
    ];
    for (content_type, body, expected) in cases {
        // A 413 may close the connection before the body is read; use a fresh one.
        if expected == 413 {
            connection = connect(&webhook).await;
        }
        let (status, text) = connection
            .send("POST", MUTATE_PATH, content_type, body)
            .await
            .expect("answer");
        assert_eq!(
            status,
            expected,
            "{content_type:?}: {}",
            String::from_utf8_lossy(&text)
        );
    }
    let mut connection = connect(&webhook).await;
    let (status, _) = connection
        .send("GET", "/healthz", None, Vec::new())
        .await
        .expect("answer");
    assert_eq!(status, 200);
    let (status, text) = connection
        .send("GET", "/metrics", None, Vec::new())
        .await
        .expect("answer");
    assert_eq!(status, 200);
    assert!(String::from_utf8_lossy(&text).contains("database_webhook_requests_total"));
}

#[tokio::test]
async fn certificate_rotation_under_load_fails_no_request() {
    let webhook = Webhook::start();
    let client = TlsClient::new(webhook.ca.cert_pem()).expect("client");
    let first = der_of(&std::fs::read_to_string(webhook.cert_dir().join("tls.crt")).expect("cert"));

    // Two loops run while the certificate is replaced twice: one over a single
    // keep-alive connection, one opening a new connection for every request.
    let keep_alive = {
        let client = client.clone();
        let addr = webhook.addr;
        tokio::spawn(async move {
            let mut connection = client.connect(addr).await.expect("connection");
            let mut failures = 0;
            for i in 0..600 {
                let body = review(&format!("k{i}"), "CREATE", &valid_spec());
                match connection.review(VALIDATE_PATH, &body).await {
                    Ok((200, answer)) if answer["response"]["allowed"] == true => {}
                    _ => failures += 1,
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            failures
        })
    };
    let fresh = {
        let client = client.clone();
        let addr = webhook.addr;
        tokio::spawn(async move {
            let mut failures = 0;
            let mut certificates = Vec::new();
            for i in 0..150 {
                match client.connect(addr).await {
                    Ok(mut connection) => {
                        if certificates.last() != Some(&connection.peer_certificate) {
                            certificates.push(connection.peer_certificate.clone());
                        }
                        let body = review(&format!("n{i}"), "CREATE", &valid_spec());
                        match connection.review(VALIDATE_PATH, &body).await {
                            Ok((200, _)) => {}
                            _ => failures += 1,
                        }
                    }
                    Err(_) => failures += 1,
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            (failures, certificates)
        })
    };
    tokio::time::sleep(Duration::from_millis(250)).await;
    let second = der_of(&webhook.issue_certificate());
    tokio::time::sleep(Duration::from_millis(400)).await;
    let third = der_of(&webhook.issue_certificate());

    let keep_alive_failures = keep_alive.await.expect("keep-alive loop");
    let (fresh_failures, served) = fresh.await.expect("new-connection loop");
    assert_eq!(
        keep_alive_failures, 0,
        "failures over the keep-alive connection"
    );
    assert_eq!(fresh_failures, 0, "failures over new connections");
    assert_eq!(
        served.first(),
        Some(&first),
        "the first certificate was served first"
    );
    assert!(
        served.contains(&second),
        "the second certificate was never served"
    );
    assert_eq!(
        served.last(),
        Some(&third),
        "the last certificate is served at the end"
    );

    let latest = connect(&webhook).await;
    assert_eq!(latest.peer_certificate, third);
}

/// Prints the webhook's own latency over one keep-alive TLS connection. Run in release
/// for representative figures:
/// `cargo test -p database-webhook --release --test tls -- latency --nocapture`.
#[tokio::test]
async fn latency_over_one_keep_alive_connection_is_reported() {
    const REQUESTS: usize = 2000;
    let webhook = Webhook::start();
    let mut connection = connect(&webhook).await;
    let body = review(
        "l",
        "CREATE",
        &json!({"engine": "mongodb", "version": "7.0", "storage": "10Gi", "replicas": 3}),
    );
    let mut samples = Vec::with_capacity(REQUESTS);
    for path in [VALIDATE_PATH, MUTATE_PATH].iter().cycle().take(REQUESTS) {
        let started = Instant::now();
        let (status, _) = connection.review(path, &body).await.expect("answer");
        samples.push(started.elapsed());
        assert_eq!(status, 200);
    }
    samples.sort_unstable();
    let p50 = samples[REQUESTS / 2];
    let p99 = samples[REQUESTS * 99 / 100];
    println!("{REQUESTS} admission requests over one TLS connection: p50 {p50:?}, p99 {p99:?}");
    // A generous bound: this is a report, not a benchmark, and the machine is shared.
    assert!(p99 < Duration::from_millis(100), "p99 {p99:?}");
}

#[tokio::test]
async fn a_client_that_never_finishes_its_handshake_or_its_headers_is_disconnected() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let webhook = Webhook::start();
    let addr = webhook.addr;
    // Connects and sends nothing: cut off by the handshake timeout (5 s).
    let started = std::time::Instant::now();
    let mut silent = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let mut buf = [0u8; 16];
    let read =
        tokio::time::timeout(std::time::Duration::from_secs(15), silent.read(&mut buf)).await;
    assert!(
        matches!(read, Ok(Ok(0) | Err(_))),
        "the server kept a silent client: {read:?}"
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(12),
        "{:?}",
        started.elapsed()
    );

    // Finishes TLS, then dribbles a request line and stops: cut off by the header timeout.
    let started = std::time::Instant::now();
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from(der_of(webhook.ca.cert_pem())))
        .expect("CA");
    let config = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config));
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").expect("name");
    let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let mut slow = connector.connect(name, tcp).await.expect("TLS");
    slow.write_all(b"POST /validate-mycompany-io-v1-database HTTP/1.1\r\nHost: x\r\n")
        .await
        .expect("partial headers");
    let read = tokio::time::timeout(std::time::Duration::from_secs(20), slow.read(&mut buf)).await;
    let answered_or_closed = match read {
        Ok(Ok(n)) => n == 0 || buf.starts_with(b"HTTP/1.1 408") || buf.starts_with(b"HTTP/1.1 4"),
        Ok(Err(_)) => true,
        Err(_) => false,
    };
    assert!(
        answered_or_closed,
        "a slow client held the connection: {read:?}"
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
}
