//! What one bootstrap run does, decided purely from what the Secret holds, what the
//! webhook configurations trust, the policy and the time.
//!
//! The serving certificate is renewed by the same CA once less than the policy's share
//! of its validity is left. A CA is rotated the same way, in three runs, so that the API
//! server never meets a certificate it does not trust:
//!
//! 1. a next CA is created and added to the caBundle; it signs nothing yet;
//! 2. once every webhook has trusted it for `ca_overlap`, it signs a new serving
//!    certificate and becomes the current CA; the old one stays in the caBundle;
//! 3. `ca_overlap` later, when every webhook Pod serves the new certificate, the old CA
//!    is dropped from the caBundle.

use std::fmt;
use std::time::Duration;

use time::OffsetDateTime;

use super::state::{NextCa, Retiring, State};
use super::verify::{self, ders, pem_of};
use super::{IssueError, Renewal, issue_ca, issue_serving, serving_end};

/// What the webhook configurations trust: for each webhook, the DER of every CA in its
/// caBundle.
pub type Trusted = [Vec<Vec<u8>>];

/// One thing a run did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// No Secret existed: a new CA and serving certificate.
    Created,
    /// The CA could not be kept (why): a new CA and serving certificate. The CAs the
    /// configurations trusted stay trusted for `ca_overlap`.
    ReplacedCa(String),
    /// The serving certificate could not be kept (why); the same CA issued another.
    ReissuedServing(String),
    /// The serving certificate neared its end; the same CA issued another.
    RenewedServing,
    /// CA rotation, step 1: a next CA was added to the caBundle.
    AddedNextCa,
    /// CA rotation, step 2: the next CA signed a new serving certificate and became the
    /// current one.
    SwitchedToNextCa,
    /// CA rotation, step 3: the CAs that signed earlier certificates were dropped from
    /// the caBundle.
    DroppedRetiredCas,
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::Created => f.write_str("created a CA and a serving certificate"),
            Step::ReplacedCa(why) => write!(f, "replaced the CA and serving certificate: {why}"),
            Step::ReissuedServing(why) => write!(f, "reissued the serving certificate: {why}"),
            Step::RenewedServing => f.write_str("renewed the serving certificate"),
            Step::AddedNextCa => f.write_str("added the next CA to the caBundle"),
            Step::SwitchedToNextCa => {
                f.write_str("switched the serving certificate to the next CA")
            }
            Step::DroppedRetiredCas => f.write_str("dropped the retired CAs from the caBundle"),
        }
    }
}

/// The state to store and trust after this run, and the steps that led to it (none
/// when nothing changes).
#[derive(Debug)]
pub struct Plan {
    pub state: State,
    pub steps: Vec<Step>,
}

/// Decides one run for a serving certificate naming `dns_names`.
pub fn plan(
    existing: Option<State>,
    trusted: &Trusted,
    dns_names: &[String],
    renewal: &Renewal,
    now: OffsetDateTime,
) -> Result<Plan, IssueError> {
    let mut steps = Vec::new();
    let mut state = match existing.map(|state| (verify::usable_ca(&state.ca, now), state)) {
        None => {
            steps.push(Step::Created);
            fresh(trusted, dns_names, renewal, now)?
        }
        Some((Err(why), _)) => {
            steps.push(Step::ReplacedCa(why));
            fresh(trusted, dns_names, renewal, now)?
        }
        Some((Ok(()), mut state)) => {
            if let Err(why) =
                verify::check_serving(&state.ca.cert_pem, &state.serving, dns_names, now)
            {
                if state.ca.key_pem.is_some() {
                    state.serving =
                        issue_serving(&state.ca, dns_names, renewal.serving_validity, now)?;
                    steps.push(Step::ReissuedServing(why));
                } else {
                    steps.push(Step::ReplacedCa(format!(
                        "{why}; no CA key is kept to issue another"
                    )));
                    state = fresh(trusted, dns_names, renewal, now)?;
                }
            }
            state
        }
    };
    advance(&mut state, &mut steps, trusted, dns_names, renewal, now)?;
    Ok(Plan { state, steps })
}

/// The renewal and rotation steps that are due.
fn advance(
    state: &mut State,
    steps: &mut Vec<Step>,
    trusted: &Trusted,
    dns_names: &[String],
    renewal: &Renewal,
    now: OffsetDateTime,
) -> Result<(), IssueError> {
    if let Some(retiring) = &state.retiring
        && (waited(retiring.since, renewal.ca_overlap, now) || all_expired(&retiring.cert_pem, now))
    {
        state.retiring = None;
        steps.push(Step::DroppedRetiredCas);
    }
    match state.next.take() {
        Some(next)
            if state.retiring.is_none()
                && waited(next.added_at, renewal.ca_overlap, now)
                && trusted_by_every_webhook(trusted, &next.ca.cert_pem) =>
        {
            state.serving = issue_serving(&next.ca, dns_names, renewal.serving_validity, now)?;
            let old = std::mem::replace(&mut state.ca, next.ca);
            state.retiring = Some(Retiring {
                cert_pem: old.cert_pem,
                since: now,
            });
            steps.push(Step::SwitchedToNextCa);
            return Ok(());
        }
        Some(next) => state.next = Some(next),
        None if ca_due(state, renewal, now) => {
            state.next = Some(NextCa {
                ca: issue_ca(renewal.ca_validity, now)?,
                added_at: now,
            });
            steps.push(Step::AddedNextCa);
        }
        None => {}
    }
    if serving_due(state, renewal, now) {
        state.serving = issue_serving(&state.ca, dns_names, renewal.serving_validity, now)?;
        steps.push(Step::RenewedServing);
    }
    Ok(())
}

/// A new CA and serving certificate; whatever the configurations trust now stays
/// trusted for `ca_overlap`, so the certificate the webhook Pods still serve keeps
/// working until they have the new one.
fn fresh(
    trusted: &Trusted,
    dns_names: &[String],
    renewal: &Renewal,
    now: OffsetDateTime,
) -> Result<State, IssueError> {
    let ca = issue_ca(renewal.ca_validity, now)?;
    let serving = issue_serving(&ca, dns_names, renewal.serving_validity, now)?;
    let mut kept: Vec<&Vec<u8>> = Vec::new();
    for der in trusted.iter().flatten() {
        if !kept.contains(&der) && !all_expired(&pem_of(der), now) {
            kept.push(der);
        }
    }
    let retiring = (!kept.is_empty()).then(|| Retiring {
        cert_pem: kept.into_iter().map(|der| pem_of(der)).collect(),
        since: now,
    });
    Ok(State {
        ca,
        serving,
        next: None,
        retiring,
    })
}

/// The CA is due for rotation: it cannot sign (no key), or less than the policy's share
/// of its validity is left.
fn ca_due(state: &State, renewal: &Renewal, now: OffsetDateTime) -> bool {
    state.ca.key_pem.is_none()
        || verify::validity(&state.ca.cert_pem)
            .is_ok_and(|(_, end)| less_than(end - now, renewal.renew_ca_within()))
}

/// The serving certificate is due: less than the policy's share of its validity is
/// left, and the CA can issue one that lasts longer (not when the CA's own end caps it).
fn serving_due(state: &State, renewal: &Renewal, now: OffsetDateTime) -> bool {
    let Ok((_, end)) = verify::validity(&state.serving.cert_pem) else {
        return false;
    };
    state.ca.key_pem.is_some()
        && less_than(end - now, renewal.renew_serving_within())
        && serving_end(&state.ca, renewal.serving_validity, now).is_ok_and(|new| new > end)
}

fn trusted_by_every_webhook(trusted: &Trusted, cert_pem: &str) -> bool {
    let wanted = ders(cert_pem);
    !trusted.is_empty()
        && !wanted.is_empty()
        && trusted
            .iter()
            .all(|bundle| wanted.iter().all(|der| bundle.contains(der)))
}

fn all_expired(cert_pem: &str, now: OffsetDateTime) -> bool {
    ders(cert_pem)
        .iter()
        .all(|der| verify::validity(&pem_of(der)).is_ok_and(|(_, end)| end <= now))
}

/// Whether `wait` has passed since `since`.
fn waited(since: OffsetDateTime, wait: Duration, now: OffsetDateTime) -> bool {
    time::Duration::try_from(wait)
        .ok()
        .and_then(|wait| since.checked_add(wait))
        .is_some_and(|due| now >= due)
}

fn less_than(left: time::Duration, within: Duration) -> bool {
    time::Duration::try_from(within).is_ok_and(|within| left < within)
}

#[cfg(test)]
mod tests;
