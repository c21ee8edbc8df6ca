//! A small S3 client for the few calls a backup needs: multipart upload, get, head and
//! delete of one object, over HTTPS with path-style addressing, signed with SigV4.

pub mod sign;
mod xml;

use std::fmt::Write as _;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use jiff::Timestamp;

pub use sign::Credentials;

/// How long one request may take, a part's upload included.
const REQUEST_LIMIT: Duration = Duration::from_secs(300);
/// How often a request that failed on the way (not refused by the store) is tried.
const ATTEMPTS: u32 = 4;

/// Where a bucket is and how to reach it.
#[derive(Clone, Debug)]
pub struct BucketConfig {
    /// `https://host[:port]`.
    pub endpoint: String,
    pub bucket: String,
    pub region: String,
    pub credentials: Credentials,
    /// PEM certificates to trust besides the system's.
    pub ca_pem: Option<Vec<u8>>,
}

/// Why a call failed, as a sentence.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Config(String),
    #[error("could not reach {endpoint} to {action}: {reason}")]
    Unreachable {
        endpoint: String,
        action: String,
        reason: String,
    },
    #[error("the store refused to {action}: {code} ({message}, HTTP {status})")]
    Refused {
        action: String,
        status: u16,
        code: String,
        message: String,
    },
}

impl Error {
    /// The store's error code, when it refused.
    pub fn code(&self) -> Option<&str> {
        match self {
            Self::Refused { code, .. } => Some(code),
            _ => None,
        }
    }
}

type Https = hyper_rustls::HttpsConnector<HttpConnector>;

/// One bucket.
#[derive(Clone)]
pub struct Bucket {
    config: BucketConfig,
    /// `host[:port]`, as the `Host` header carries it.
    authority: String,
    http: Client<Https, Full<Bytes>>,
}

impl std::fmt::Debug for Bucket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bucket")
            .field("endpoint", &self.config.endpoint)
            .field("bucket", &self.config.bucket)
            .finish_non_exhaustive()
    }
}

impl Bucket {
    /// A client for the bucket; nothing is sent yet.
    pub fn new(config: BucketConfig) -> Result<Self, Error> {
        let authority = config
            .endpoint
            .strip_prefix("https://")
            .map(|rest| rest.trim_end_matches('/').to_owned())
            .filter(|a| !a.is_empty() && !a.contains('/'))
            .ok_or_else(|| {
                Error::Config(format!(
                    "the endpoint {} is not https://host[:port]",
                    config.endpoint
                ))
            })?;
        let tls = tls_config(config.ca_pem.as_deref())?;
        let mut tcp = HttpConnector::new();
        tcp.enforce_http(false);
        tcp.set_connect_timeout(Some(Duration::from_secs(10)));
        tcp.set_nodelay(true);
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_only()
            .enable_http1()
            .wrap_connector(tcp);
        let http = Client::builder(TokioExecutor::new()).build(https);
        Ok(Self {
            config,
            authority,
            http,
        })
    }

    /// `s3://<bucket>/<key>`, for people.
    pub fn location(&self, key: &str) -> String {
        format!("s3://{}/{key}", self.config.bucket)
    }

    /// Creates the bucket (the tests' store starts empty).
    pub async fn create(&self) -> Result<(), Error> {
        let action = format!("create the bucket {}", self.config.bucket);
        self.call(Method::PUT, None, &[], Bytes::new(), &action)
            .await
            .map(drop)
    }

    /// Starts a multipart upload of `key`; returns its id.
    pub async fn start_upload(&self, key: &str) -> Result<String, Error> {
        let action = format!("start the upload of {}", self.location(key));
        let response = self
            .call(
                Method::POST,
                Some(key),
                &[("uploads", "")],
                Bytes::new(),
                &action,
            )
            .await?;
        let body = text(response).await;
        xml::element(&body, "UploadId").ok_or(Error::Refused {
            action,
            status: 200,
            code: "NoUploadId".into(),
            message: "the answer named no upload".into(),
        })
    }

    /// Uploads part `number` (from 1) of an upload; returns its ETag.
    pub async fn upload_part(
        &self,
        key: &str,
        upload: &str,
        number: u32,
        body: Bytes,
    ) -> Result<String, Error> {
        let action = format!("upload part {number} of {}", self.location(key));
        let number = number.to_string();
        let response = self
            .call(
                Method::PUT,
                Some(key),
                &[("partNumber", &number), ("uploadId", upload)],
                body,
                &action,
            )
            .await?;
        response
            .headers()
            .get(http::header::ETAG)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
            .ok_or(Error::Refused {
                action,
                status: 200,
                code: "NoETag".into(),
                message: "the answer carried no ETag".into(),
            })
    }

    /// Completes an upload from its parts' ETags, in order.
    pub async fn complete_upload(
        &self,
        key: &str,
        upload: &str,
        etags: &[String],
    ) -> Result<(), Error> {
        let action = format!("complete the upload of {}", self.location(key));
        let mut body = String::from("<CompleteMultipartUpload>");
        for (index, etag) in etags.iter().enumerate() {
            let _ = write!(
                body,
                "<Part><PartNumber>{}</PartNumber><ETag>{}</ETag></Part>",
                index + 1,
                xml::escape(etag)
            );
        }
        body.push_str("</CompleteMultipartUpload>");
        let response = self
            .call(
                Method::POST,
                Some(key),
                &[("uploadId", upload)],
                Bytes::from(body),
                &action,
            )
            .await?;
        // S3 may answer 200 and report the failure in the body.
        let answer = text(response).await;
        match xml::element(&answer, "Code") {
            Some(code) => Err(Error::Refused {
                action,
                status: 200,
                code,
                message: xml::element(&answer, "Message").unwrap_or_default(),
            }),
            None => Ok(()),
        }
    }

    /// Abandons an upload and the parts sent so far.
    pub async fn abort_upload(&self, key: &str, upload: &str) -> Result<(), Error> {
        let action = format!("abort the upload of {}", self.location(key));
        self.call(
            Method::DELETE,
            Some(key),
            &[("uploadId", upload)],
            Bytes::new(),
            &action,
        )
        .await
        .map(drop)
    }

    /// The object's body, streamed.
    pub async fn get(&self, key: &str) -> Result<Incoming, Error> {
        let action = format!("read {}", self.location(key));
        let response = self
            .call(Method::GET, Some(key), &[], Bytes::new(), &action)
            .await?;
        Ok(response.into_body())
    }

    /// The object's size, or `None` when there is no such object.
    pub async fn size(&self, key: &str) -> Result<Option<u64>, Error> {
        let action = format!("look up {}", self.location(key));
        match self
            .call(Method::HEAD, Some(key), &[], Bytes::new(), &action)
            .await
        {
            Ok(response) => Ok(response
                .headers()
                .get(http::header::CONTENT_LENGTH)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse().ok())),
            Err(Error::Refused { status: 404, .. }) => Ok(None),
            Err(err) => Err(err),
        }
    }

    /// Deletes the object; deleting one that is not there succeeds.
    pub async fn delete(&self, key: &str) -> Result<(), Error> {
        let action = format!("delete {}", self.location(key));
        match self
            .call(Method::DELETE, Some(key), &[], Bytes::new(), &action)
            .await
        {
            Ok(_) | Err(Error::Refused { status: 404, .. }) => Ok(()),
            Err(err) => Err(err),
        }
    }

    /// Sends one signed request, again when it failed on the way; a refusal is final.
    async fn call(
        &self,
        method: Method,
        key: Option<&str>,
        query: &[(&str, &str)],
        body: Bytes,
        action: &str,
    ) -> Result<Response<Incoming>, Error> {
        let mut attempt = 1;
        loop {
            let request = self.request(&method, key, query, body.clone())?;
            let outcome = tokio::time::timeout(REQUEST_LIMIT, self.http.request(request)).await;
            let reason = match outcome {
                Ok(Ok(response)) if response.status().is_success() => return Ok(response),
                Ok(Ok(response)) if response.status().is_server_error() && attempt < ATTEMPTS => {
                    format!("HTTP {}", response.status())
                }
                Ok(Ok(response)) => return Err(refusal(response, action).await),
                Ok(Err(err)) if is_tls_refusal(&err) => {
                    return Err(Error::Unreachable {
                        endpoint: self.config.endpoint.clone(),
                        action: action.to_owned(),
                        reason: describe(&err),
                    });
                }
                Ok(Err(err)) => describe(&err),
                Err(_) => format!("no answer within {}s", REQUEST_LIMIT.as_secs()),
            };
            if attempt >= ATTEMPTS {
                return Err(Error::Unreachable {
                    endpoint: self.config.endpoint.clone(),
                    action: action.to_owned(),
                    reason,
                });
            }
            tokio::time::sleep(Duration::from_millis(500 << attempt)).await;
            attempt += 1;
        }
    }

    fn request(
        &self,
        method: &Method,
        key: Option<&str>,
        query: &[(&str, &str)],
        body: Bytes,
    ) -> Result<Request<Full<Bytes>>, Error> {
        let path = match key {
            Some(key) => format!(
                "/{}/{}",
                sign::uri_encode(&self.config.bucket, false),
                sign::uri_encode(key, true)
            ),
            None => format!("/{}", sign::uri_encode(&self.config.bucket, false)),
        };
        let query_string = sign::canonical_query(query);
        let uri = if query_string.is_empty() {
            format!("https://{}{path}", self.authority)
        } else {
            format!("https://{}{path}?{query_string}", self.authority)
        };
        let now = Timestamp::now();
        let payload_hash = sign::payload_hash(&body);
        let date = sign::amz_date(now);
        let authorization = sign::authorization(
            &self.config.credentials,
            &self.config.region,
            now,
            &sign::Request {
                method: method.as_str(),
                path: &path,
                query,
                headers: &[
                    ("host", &self.authority),
                    ("x-amz-content-sha256", &payload_hash),
                    ("x-amz-date", &date),
                ],
                payload_hash: &payload_hash,
            },
        );
        Request::builder()
            .method(method.clone())
            .uri(uri)
            .header(http::header::HOST, &self.authority)
            .header("x-amz-content-sha256", payload_hash)
            .header("x-amz-date", date)
            .header(http::header::AUTHORIZATION, authorization)
            .body(Full::new(body))
            .map_err(|err| Error::Config(format!("the request could not be made: {err}")))
    }
}

/// rustls over ring, TLS 1.2 and 1.3, trusting the system's roots and `ca_pem`.
fn tls_config(ca_pem: Option<&[u8]>) -> Result<rustls::ClientConfig, Error> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;

    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_native_certs::load_native_certs().certs {
        // A system certificate rustls cannot read is skipped, as a browser would.
        let _ = roots.add(cert);
    }
    if let Some(pem) = ca_pem {
        let mut added = 0;
        for cert in CertificateDer::pem_slice_iter(pem) {
            let cert = cert.map_err(|err| {
                Error::Config(format!("the CA bundle is not PEM certificates: {err}"))
            })?;
            roots.add(cert).map_err(|err| {
                Error::Config(format!("a certificate of the CA bundle is unusable: {err}"))
            })?;
            added += 1;
        }
        if added == 0 {
            return Err(Error::Config(
                "the CA bundle holds no PEM certificate".into(),
            ));
        }
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|err| Error::Config(format!("TLS could not be set up: {err}")))?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

/// A refusal from the store's error document.
async fn refusal(response: Response<Incoming>, action: &str) -> Error {
    let status = response.status();
    let body = text(response).await;
    Error::Refused {
        action: action.to_owned(),
        status: status.as_u16(),
        code: xml::element(&body, "Code").unwrap_or_else(|| {
            status
                .canonical_reason()
                .unwrap_or("Unknown")
                .replace(' ', "")
        }),
        message: xml::element(&body, "Message").unwrap_or_else(|| {
            if status == StatusCode::NOT_FOUND {
                "not found".to_owned()
            } else {
                "no reason given".to_owned()
            }
        }),
    }
}

/// A small answer's body as text (an error document, an upload id).
async fn text(response: Response<Incoming>) -> String {
    match response.into_body().collect().await {
        Ok(collected) => String::from_utf8_lossy(&collected.to_bytes()).into_owned(),
        Err(_) => String::new(),
    }
}

/// Whether TLS refused the store (its certificate, above all): trying again cannot help.
fn is_tls_refusal(err: &(dyn std::error::Error + 'static)) -> bool {
    if err.downcast_ref::<rustls::Error>().is_some() {
        return true;
    }
    // An I/O error's `source` skips the error it wraps; look inside it first.
    if let Some(inner) = err
        .downcast_ref::<std::io::Error>()
        .and_then(std::io::Error::get_ref)
        && is_tls_refusal(inner)
    {
        return true;
    }
    err.source().is_some_and(is_tls_refusal)
}

/// A transport error with its causes, which hyper keeps apart.
fn describe(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
