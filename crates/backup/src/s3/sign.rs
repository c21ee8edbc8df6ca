//! AWS Signature Version 4 for S3 requests, signed in the `Authorization` header.

use std::fmt::Write as _;

use jiff::Timestamp;
use ring::{digest, hmac};

/// An access key pair.
#[derive(Clone)]
pub struct Credentials {
    pub access_key_id: String,
    pub secret_access_key: String,
}

impl std::fmt::Debug for Credentials {
    // The secret never reaches a log.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("access_key_id", &self.access_key_id)
            .finish_non_exhaustive()
    }
}

/// The payload hash for a body: hex SHA-256.
pub fn payload_hash(body: &[u8]) -> String {
    hex(digest::digest(&digest::SHA256, body).as_ref())
}

/// What a request signs: method, path (already URI-encoded), query pairs (not yet
/// encoded), headers (lowercase names) and the payload hash.
pub struct Request<'a> {
    pub method: &'a str,
    pub path: &'a str,
    pub query: &'a [(&'a str, &'a str)],
    pub headers: &'a [(&'a str, &'a str)],
    pub payload_hash: &'a str,
}

/// The `Authorization` header value for `request`, made at `at` in `region` for the
/// service `s3`. `request.headers` must hold `host`, `x-amz-date` and
/// `x-amz-content-sha256`.
pub fn authorization(
    credentials: &Credentials,
    region: &str,
    at: Timestamp,
    request: &Request<'_>,
) -> String {
    let date = at.strftime("%Y%m%d").to_string();
    let stamp = amz_date(at);
    let mut headers: Vec<(String, String)> = request
        .headers
        .iter()
        .map(|(name, value)| (name.to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    headers.sort();
    let signed_headers = headers
        .iter()
        .map(|(name, _)| name.as_str())
        .collect::<Vec<_>>()
        .join(";");
    let mut canonical = format!(
        "{}\n{}\n{}\n",
        request.method,
        request.path,
        canonical_query(request.query)
    );
    for (name, value) in &headers {
        let _ = writeln!(canonical, "{name}:{value}");
    }
    let _ = write!(canonical, "\n{signed_headers}\n{}", request.payload_hash);
    let scope = format!("{date}/{region}/s3/aws4_request");
    let to_sign = format!(
        "AWS4-HMAC-SHA256\n{stamp}\n{scope}\n{}",
        payload_hash(canonical.as_bytes())
    );
    let key = [date.as_str(), region, "s3", "aws4_request"].iter().fold(
        format!("AWS4{}", credentials.secret_access_key).into_bytes(),
        |key, part| mac(&key, part.as_bytes()),
    );
    let signature = hex(&mac(&key, to_sign.as_bytes()));
    format!(
        "AWS4-HMAC-SHA256 Credential={}/{scope}, SignedHeaders={signed_headers}, Signature={signature}",
        credentials.access_key_id
    )
}

/// The `x-amz-date` value: `20130524T000000Z`.
pub fn amz_date(at: Timestamp) -> String {
    at.strftime("%Y%m%dT%H%M%SZ").to_string()
}

/// URI-encodes `text` as SigV4 asks: everything but unreserved characters, and `/`
/// too unless `keep_slash`.
pub fn uri_encode(text: &str, keep_slash: bool) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(char::from(byte));
            }
            b'/' if keep_slash => out.push('/'),
            _ => {
                let _ = write!(out, "%{byte:02X}");
            }
        }
    }
    out
}

/// The query string, encoded and sorted, as both the canonical request and the URL
/// carry it.
pub fn canonical_query(query: &[(&str, &str)]) -> String {
    let mut pairs: Vec<(String, String)> = query
        .iter()
        .map(|(k, v)| (uri_encode(k, false), uri_encode(v, false)))
        .collect();
    pairs.sort();
    pairs
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&")
}

fn mac(key: &[u8], data: &[u8]) -> Vec<u8> {
    hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, key), data)
        .as_ref()
        .to_vec()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::with_capacity(64), |mut out, b| {
        let _ = write!(out, "{b:02x}");
        out
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example AWS publishes for a signed GET of an object with a Range header.
    #[test]
    fn the_published_get_object_example_signs_alike() {
        let credentials = Credentials {
            access_key_id: "AKIAIOSFODNN7EXAMPLE".into(),
            secret_access_key: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY".into(),
        };
        let empty = payload_hash(b"");
        assert_eq!(
            empty,
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        let at: Timestamp = "2013-05-24T00:00:00Z".parse().expect("time");
        let authorization = authorization(
            &credentials,
            "us-east-1",
            at,
            &Request {
                method: "GET",
                path: "/test.txt",
                query: &[],
                headers: &[
                    ("host", "examplebucket.s3.amazonaws.com"),
                    ("range", "bytes=0-9"),
                    ("x-amz-content-sha256", &empty),
                    ("x-amz-date", &amz_date(at)),
                ],
                payload_hash: &empty,
            },
        );
        assert_eq!(
            authorization,
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"
        );
    }

    #[test]
    fn keys_and_query_values_are_encoded_as_sigv4_asks() {
        assert_eq!(
            uri_encode("shop/orders 1+2.sql.gz", true),
            "shop/orders%201%2B2.sql.gz"
        );
        assert_eq!(uri_encode("a/b", false), "a%2Fb");
        assert_eq!(
            canonical_query(&[("uploadId", "x/y=z"), ("partNumber", "2")]),
            "partNumber=2&uploadId=x%2Fy%3Dz"
        );
    }

    #[test]
    fn the_secret_never_shows_in_debug_output() {
        let credentials = Credentials {
            access_key_id: "AK".into(),
            secret_access_key: "very-secret".into(),
        };
        assert!(!format!("{credentials:?}").contains("very-secret"));
    }
}
