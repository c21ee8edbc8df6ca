//! Runs of `plan` at chosen times: renewal, the three steps of a CA rotation, and what
//! happens to Secrets that cannot be kept.

use super::*;
use crate::certs::{Ca, Serving, service_dns_names};

const HOUR: Duration = Duration::from_secs(60 * 60);
const DAY: Duration = Duration::from_secs(24 * 60 * 60);

fn names() -> Vec<String> {
    service_dns_names("database-webhook", "database-operator-system").to_vec()
}

fn start() -> OffsetDateTime {
    OffsetDateTime::now_utc()
}

/// The Secret and both webhook configurations, as bootstrap keeps them.
struct Cluster {
    state: Option<State>,
    bundle: String,
}

impl Cluster {
    fn new() -> Self {
        Self {
            state: None,
            bundle: String::new(),
        }
    }

    /// One bootstrap run at `at`: the Secret is written, then the caBundle.
    fn run(&mut self, renewal: &Renewal, at: OffsetDateTime) -> Vec<Step> {
        let trusted = vec![ders(&self.bundle); 2];
        let plan = plan(self.state.clone(), &trusted, &names(), renewal, at).expect("plan");
        self.bundle = plan.state.trust_bundle();
        self.state = Some(plan.state);
        plan.steps
    }

    fn state(&self) -> &State {
        self.state.as_ref().expect("bootstrapped")
    }
}

fn serves(bundle: &str, serving: &Serving, at: OffsetDateTime) -> Result<(), String> {
    verify::check_serving(bundle, serving, &names(), at)
}

#[test]
fn a_first_run_creates_a_kept_ca_and_a_later_run_changes_nothing() {
    let renewal = Renewal::default();
    let mut cluster = Cluster::new();
    assert_eq!(cluster.run(&renewal, start()), [Step::Created]);
    let created = cluster.state().clone();
    assert!(created.ca.key_pem.is_some());
    assert_eq!(ders(&cluster.bundle), ders(&created.ca.cert_pem));
    assert_eq!(serves(&cluster.bundle, &created.serving, start()), Ok(()));

    assert_eq!(cluster.run(&renewal, start() + 30 * DAY), []);
    assert_eq!(cluster.state(), &created);
}

#[test]
fn the_serving_certificate_is_renewed_by_the_same_ca_once_a_third_of_it_is_left() {
    let renewal = Renewal::default();
    let mut cluster = Cluster::new();
    cluster.run(&renewal, start());
    let first = cluster.state().clone();
    // 365 days, renewed with less than 33% (120.45 days) left.
    assert_eq!(cluster.run(&renewal, start() + 244 * DAY), []);
    assert_eq!(
        cluster.run(&renewal, start() + 245 * DAY),
        [Step::RenewedServing]
    );
    let renewed = cluster.state();
    assert_eq!(renewed.ca, first.ca);
    assert_ne!(renewed.serving, first.serving);
    assert_eq!(ders(&cluster.bundle), ders(&first.ca.cert_pem));
    assert_eq!(
        serves(&cluster.bundle, &renewed.serving, start() + 400 * DAY),
        Ok(())
    );
}

/// Daily runs for eleven years with the defaults. After every run, the certificate the
/// webhook Pods may still serve (the previous one, until kubelet updates the volume)
/// and the new one are both trusted by the caBundle just written, and the new one was
/// already trusted by the caBundle before the run.
#[test]
fn daily_runs_renew_and_rotate_without_ever_serving_an_untrusted_certificate() {
    let renewal = Renewal::default();
    let mut cluster = Cluster::new();
    cluster.run(&renewal, start());
    let mut seen = Vec::new();
    for day in 1..=(11 * 365) {
        let at = start() + day * DAY;
        let before = cluster.state().clone();
        let bundle_before = cluster.bundle.clone();
        let steps = cluster.run(&renewal, at);
        let after = cluster.state();
        assert_eq!(
            serves(&cluster.bundle, &before.serving, at),
            Ok(()),
            "day {day}: {steps:?}"
        );
        assert_eq!(
            serves(&cluster.bundle, &after.serving, at),
            Ok(()),
            "day {day}: {steps:?}"
        );
        assert_eq!(
            serves(&bundle_before, &after.serving, at),
            Ok(()),
            "day {day}: {steps:?}"
        );
        seen.extend(steps.into_iter().map(|step| (day, step)));
    }
    let days_of = |wanted: &Step| -> Vec<u32> {
        seen.iter()
            .filter(|(_, step)| step == wanted)
            .map(|(day, _)| *day)
            .collect()
    };
    // The CA (3650 days) is rotated once, starting with less than 1204.5 days left.
    assert_eq!(days_of(&Step::AddedNextCa), [2446]);
    assert_eq!(days_of(&Step::SwitchedToNextCa), [2447]);
    assert_eq!(days_of(&Step::DroppedRetiredCas), [2448]);
    // The serving certificate every 245 days, and anew at the switch.
    assert_eq!(
        days_of(&Step::RenewedServing),
        [
            245, 490, 735, 980, 1225, 1470, 1715, 1960, 2205, 2692, 2937, 3182, 3427, 3672, 3917
        ]
    );
    assert_eq!(seen.len(), 18, "{seen:?}");
}

#[test]
fn the_switch_waits_until_every_webhook_has_trusted_the_next_ca_for_the_overlap() {
    let renewal = Renewal::default();
    let mut cluster = Cluster::new();
    cluster.run(&renewal, start());
    // A leap of years: the serving certificate has expired meanwhile and is reissued too.
    let added = start() + 2446 * DAY;
    assert!(cluster.run(&renewal, added).contains(&Step::AddedNextCa));
    let pending = cluster.state().clone();
    let current = ders(&pending.ca.cert_pem);
    let both = ders(&cluster.bundle);
    let decide = |trusted: &[Vec<Vec<u8>>], at| {
        plan(Some(pending.clone()), trusted, &names(), &renewal, at)
            .expect("plan")
            .steps
    };
    let later = added + renewal.ca_overlap;
    assert_eq!(decide(&[both.clone(), both.clone()], later - HOUR / 2), []);
    assert_eq!(decide(&[both.clone(), current.clone()], later), []);
    assert_eq!(decide(&[], later), []);
    assert_eq!(
        decide(&[both.clone(), both], later),
        [Step::SwitchedToNextCa]
    );
}

#[test]
fn a_secret_without_a_ca_key_is_moved_to_a_kept_ca_without_a_gap() {
    let renewal = Renewal::default();
    let mut cluster = Cluster::new();
    cluster.run(&renewal, start());
    // As an earlier version (or cert-manager) wrote it: no ca.key.
    let legacy = cluster.state.as_mut().expect("state");
    legacy.ca.key_pem = None;
    let served = legacy.serving.clone();

    let at = start() + DAY;
    assert_eq!(cluster.run(&renewal, at), [Step::AddedNextCa]);
    assert_eq!(cluster.state().serving, served);
    assert_eq!(
        cluster.run(&renewal, at + renewal.ca_overlap),
        [Step::SwitchedToNextCa]
    );
    assert!(cluster.state().ca.key_pem.is_some());
    assert_eq!(
        serves(&cluster.bundle, &served, at + renewal.ca_overlap),
        Ok(())
    );
    assert_eq!(
        cluster.run(&renewal, at + 2 * renewal.ca_overlap),
        [Step::DroppedRetiredCas]
    );
    assert_eq!(ders(&cluster.bundle), ders(&cluster.state().ca.cert_pem));
}

#[test]
fn a_serving_certificate_for_another_service_is_reissued_by_the_same_ca() {
    let renewal = Renewal::default();
    let mut cluster = Cluster::new();
    cluster.run(&renewal, start());
    let state = cluster.state.as_mut().expect("state");
    let other = service_dns_names("other", "elsewhere");
    state.serving = issue_serving(&state.ca, &other, DAY, start()).expect("leaf");
    let ca = state.ca.clone();

    let steps = cluster.run(&renewal, start());
    assert!(
        matches!(&steps[..], [Step::ReissuedServing(why)] if why.contains("database-webhook.database-operator-system.svc")),
        "{steps:?}"
    );
    assert_eq!(cluster.state().ca, ca);
    assert_eq!(
        serves(&cluster.bundle, &cluster.state().serving, start()),
        Ok(())
    );
}

#[test]
fn an_unusable_ca_is_replaced_and_what_was_trusted_stays_trusted_for_the_overlap() {
    let renewal = Renewal::default();
    let mut cluster = Cluster::new();
    cluster.run(&renewal, start());
    let old = cluster.state().clone();
    let other = issue_ca(DAY, start()).expect("CA");
    cluster.state.as_mut().expect("state").ca = Ca {
        key_pem: other.key_pem,
        ..old.ca.clone()
    };

    let steps = cluster.run(&renewal, start() + HOUR);
    assert!(
        matches!(&steps[..], [Step::ReplacedCa(why)] if why.contains("ca.key")),
        "{steps:?}"
    );
    assert_ne!(cluster.state().ca, old.ca);
    assert_eq!(
        serves(&cluster.bundle, &old.serving, start() + HOUR),
        Ok(())
    );
    assert_eq!(
        cluster.run(&renewal, start() + HOUR + renewal.ca_overlap),
        [Step::DroppedRetiredCas]
    );
    assert_eq!(ders(&cluster.bundle), ders(&cluster.state().ca.cert_pem));
}

#[test]
fn a_ca_near_its_end_caps_the_serving_certificate_and_does_not_reissue_it_every_run() {
    let renewal = Renewal {
        ca_validity: 10 * DAY,
        ..Renewal::default()
    };
    let mut cluster = Cluster::new();
    cluster.run(&renewal, start());
    let capped = cluster.state().serving.clone();
    assert_eq!(
        verify::validity(&capped.cert_pem).expect("dates").1,
        verify::validity(&cluster.state().ca.cert_pem)
            .expect("dates")
            .1
    );
    // 3 of 10 days left: the next CA is added. The configurations never take it here,
    // so the switch waits, and the capped certificate is not reissued run after run.
    let at = start() + 7 * DAY;
    let first = plan(cluster.state.clone(), &[], &names(), &renewal, at).expect("plan");
    assert_eq!(first.steps, [Step::AddedNextCa]);
    let second = plan(Some(first.state), &[], &names(), &renewal, at + DAY).expect("plan");
    assert_eq!(second.steps, []);
    assert_eq!(second.state.serving, capped);
}
