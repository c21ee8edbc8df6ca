//! What the serving Secret holds, read from and written back to it.
//!
//! A `kubernetes.io/tls` Secret: `tls.crt` and `tls.key` (the serving certificate the
//! webhook Pods mount) and `ca.crt` (the CA that signed it), as cert-manager writes
//! them, plus what renewal needs: `ca.key`, and during a CA rotation the next CA
//! (`next-ca.crt`, `next-ca.key`) or the CAs being retired (`retiring-ca.crt`), with the
//! time each step began in an annotation.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::jiff::Timestamp;
use time::OffsetDateTime;

use super::verify::{ders, pem_of};
use super::{Ca, Serving};

const CA_CERT: &str = "ca.crt";
const CA_KEY: &str = "ca.key";
const TLS_CERT: &str = "tls.crt";
const TLS_KEY: &str = "tls.key";
const NEXT_CA_CERT: &str = "next-ca.crt";
const NEXT_CA_KEY: &str = "next-ca.key";
const RETIRING_CA_CERTS: &str = "retiring-ca.crt";
/// When the next CA was created and added to the caBundle.
pub const NEXT_CA_ADDED_AT: &str = "mycompany.io/next-ca-added-at";
/// When the serving certificate switched to the current CA; the retiring CAs have
/// signed nothing served since a little after.
pub const CA_SWITCHED_AT: &str = "mycompany.io/ca-switched-at";

/// The certificates kept in the Secret.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct State {
    /// The CA that signed `serving`.
    pub ca: Ca,
    /// What the webhook serves.
    pub serving: Serving,
    /// A CA that is trusted already but signs nothing yet.
    pub next: Option<NextCa>,
    /// CAs that are still trusted but sign nothing any more.
    pub retiring: Option<Retiring>,
}

/// A CA waiting for every API server to trust it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NextCa {
    pub ca: Ca,
    pub added_at: OffsetDateTime,
}

/// CAs (PEM, one or more) waiting until no webhook Pod serves what they signed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Retiring {
    pub cert_pem: String,
    pub since: OffsetDateTime,
}

impl State {
    /// Reads the Secret; `None` when it lacks `ca.crt`, `tls.crt` or `tls.key`. A step
    /// whose time is missing is taken to have begun `now`, so it waits its full time.
    pub fn from_secret(secret: &Secret, now: OffsetDateTime) -> Option<Self> {
        let data = secret.data.as_ref()?;
        let text = |key: &str| {
            data.get(key)
                .and_then(|value| String::from_utf8(value.0.clone()).ok())
                .filter(|text| !text.trim().is_empty())
        };
        let annotations = secret.metadata.annotations.clone().unwrap_or_default();
        let time_of = |key: &str| {
            annotations
                .get(key)
                .and_then(|text| text.parse::<Timestamp>().ok())
                .and_then(|at| OffsetDateTime::from_unix_timestamp(at.as_second()).ok())
                .unwrap_or(now)
        };
        let next = match (text(NEXT_CA_CERT), text(NEXT_CA_KEY)) {
            (Some(cert_pem), Some(key_pem)) => Some(NextCa {
                ca: Ca {
                    cert_pem,
                    key_pem: Some(key_pem),
                },
                added_at: time_of(NEXT_CA_ADDED_AT),
            }),
            _ => None,
        };
        Some(Self {
            ca: Ca {
                cert_pem: text(CA_CERT)?,
                key_pem: text(CA_KEY),
            },
            serving: Serving {
                cert_pem: text(TLS_CERT)?,
                key_pem: text(TLS_KEY)?,
            },
            next,
            retiring: text(RETIRING_CA_CERTS).map(|cert_pem| Retiring {
                cert_pem,
                since: time_of(CA_SWITCHED_AT),
            }),
        })
    }

    /// The Secret's `data`.
    pub fn data(&self) -> BTreeMap<String, ByteString> {
        let mut data = BTreeMap::new();
        let mut put = |key: &str, text: &str| {
            data.insert(key.to_owned(), ByteString(text.as_bytes().to_vec()));
        };
        put(CA_CERT, &self.ca.cert_pem);
        put(TLS_CERT, &self.serving.cert_pem);
        put(TLS_KEY, &self.serving.key_pem);
        if let Some(key) = &self.ca.key_pem {
            put(CA_KEY, key);
        }
        if let Some(next) = &self.next {
            put(NEXT_CA_CERT, &next.ca.cert_pem);
            if let Some(key) = &next.ca.key_pem {
                put(NEXT_CA_KEY, key);
            }
        }
        if let Some(retiring) = &self.retiring {
            put(RETIRING_CA_CERTS, &retiring.cert_pem);
        }
        data
    }

    /// Sets this state's step times in `annotations`, and removes those of steps that
    /// are over; other annotations are kept.
    pub fn annotate(&self, annotations: &mut BTreeMap<String, String>) {
        let mut set = |key: &str, at: Option<OffsetDateTime>| {
            match at.and_then(|at| Timestamp::from_second(at.unix_timestamp()).ok()) {
                Some(at) => annotations.insert(key.to_owned(), at.to_string()),
                None => annotations.remove(key),
            };
        };
        set(
            NEXT_CA_ADDED_AT,
            self.next.as_ref().map(|next| next.added_at),
        );
        set(
            CA_SWITCHED_AT,
            self.retiring.as_ref().map(|retiring| retiring.since),
        );
    }

    /// Every CA to trust, each once: the current one, the next, the retiring ones.
    pub fn trust_bundle(&self) -> String {
        let mut seen = Vec::new();
        let pems = [
            Some(self.ca.cert_pem.as_str()),
            self.next.as_ref().map(|next| next.ca.cert_pem.as_str()),
            self.retiring.as_ref().map(|r| r.cert_pem.as_str()),
        ];
        let mut bundle = String::new();
        for der in pems.into_iter().flatten().flat_map(ders) {
            if !seen.contains(&der) {
                bundle.push_str(&pem_of(&der));
                seen.push(der);
            }
        }
        bundle
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::certs::{issue_ca, issue_serving};

    fn state() -> State {
        let now = OffsetDateTime::now_utc();
        let day = Duration::from_secs(86_400);
        let ca = issue_ca(day, now).expect("CA");
        let next = issue_ca(day, now).expect("CA");
        let old = issue_ca(day, now).expect("CA");
        State {
            serving: issue_serving(&ca, &["a.b.svc".to_owned()], day, now).expect("leaf"),
            ca,
            next: Some(NextCa {
                ca: next,
                added_at: now.replace_nanosecond(0).expect("whole second"),
            }),
            retiring: Some(Retiring {
                cert_pem: old.cert_pem,
                since: now.replace_nanosecond(0).expect("whole second"),
            }),
        }
    }

    fn secret_of(state: &State) -> Secret {
        let mut annotations = BTreeMap::from([("team".to_owned(), "a".to_owned())]);
        state.annotate(&mut annotations);
        let mut secret = Secret {
            data: Some(state.data()),
            ..Secret::default()
        };
        secret.metadata.annotations = Some(annotations);
        secret
    }

    #[test]
    fn a_state_survives_the_secret() {
        let state = state();
        let secret = secret_of(&state);
        assert_eq!(
            State::from_secret(&secret, OffsetDateTime::UNIX_EPOCH),
            Some(state)
        );
        assert_eq!(secret.metadata.annotations.expect("kept")["team"], "a");
    }

    #[test]
    fn the_bundle_trusts_every_ca_once() {
        let state = state();
        let bundle = state.trust_bundle();
        assert_eq!(ders(&bundle).len(), 3);
        let mut twice = state.clone();
        twice.retiring = Some(Retiring {
            cert_pem: format!("{}{}", state.ca.cert_pem, state.ca.cert_pem),
            since: OffsetDateTime::UNIX_EPOCH,
        });
        assert_eq!(ders(&twice.trust_bundle()).len(), 2);
    }

    #[test]
    fn a_secret_written_by_cert_manager_reads_without_a_ca_key_or_a_rotation() {
        let state = state();
        let mut data = state.data();
        data.retain(|key, _| [CA_CERT, TLS_CERT, TLS_KEY].contains(&key.as_str()));
        let secret = Secret {
            data: Some(data),
            ..Secret::default()
        };
        let read = State::from_secret(&secret, OffsetDateTime::UNIX_EPOCH).expect("read");
        assert_eq!(read.ca.key_pem, None);
        assert_eq!((read.next, read.retiring), (None, None));
    }

    #[test]
    fn a_secret_without_a_serving_key_is_no_state() {
        let mut data = state().data();
        data.remove(TLS_KEY);
        let secret = Secret {
            data: Some(data),
            ..Secret::default()
        };
        assert_eq!(
            State::from_secret(&secret, OffsetDateTime::UNIX_EPOCH),
            None
        );
    }

    #[test]
    fn a_step_without_its_time_begins_now() {
        let state = state();
        let secret = Secret {
            data: Some(state.data()),
            ..Secret::default()
        };
        let now = OffsetDateTime::UNIX_EPOCH + Duration::from_secs(42);
        let read = State::from_secret(&secret, now).expect("read");
        assert_eq!(read.next.expect("next").added_at, now);
        assert_eq!(read.retiring.expect("retiring").since, now);
    }
}
