//! Talking to etcd directly through its JSON gateway, for fault injection.

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Compacts etcd's history up to its current revision, so any watch that resumes from
/// an older resourceVersion gets `410 Gone` and must list again. Returns the revision.
pub async fn compact(etcd_url: &str) -> std::io::Result<u64> {
    // Any range request answers with the current revision in its header.
    let range = post(etcd_url, "/v3/kv/range", r#"{"key":"AA=="}"#).await?;
    let revision: u64 = range["header"]["revision"]
        .as_str()
        .and_then(|r| r.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("no revision in {range}")))?;
    post(
        etcd_url,
        "/v3/kv/compaction",
        &format!(r#"{{"revision":"{revision}","physical":true}}"#),
    )
    .await?;
    Ok(revision)
}

async fn post(etcd_url: &str, path: &str, body: &str) -> std::io::Result<serde_json::Value> {
    tokio::time::timeout(
        std::time::Duration::from_secs(10),
        exchange(etcd_url, path, body),
    )
    .await
    .map_err(|_| std::io::Error::other(format!("etcd {path}: no answer in 10 s")))?
}

async fn exchange(etcd_url: &str, path: &str, body: &str) -> std::io::Result<serde_json::Value> {
    let address = etcd_url.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(address).await?;
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await?;
    let (head, payload) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    if !head.starts_with("HTTP/1.1 200") {
        return Err(std::io::Error::other(format!("etcd {path}: {head}")));
    }
    // The gateway may answer with chunked encoding; the JSON object is the part in braces.
    let start = payload.find('{').unwrap_or(0);
    let end = payload.rfind('}').map_or(payload.len(), |i| i + 1);
    serde_json::from_str(&payload[start..end]).map_err(std::io::Error::other)
}
