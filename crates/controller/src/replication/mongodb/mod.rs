//! What the controller asks a mongodb instance: every member, over the wire protocol,
//! what it answers before any login (`hello`, `buildInfo`; see [`wire`]); the writable
//! primary, through `mongosh` in its container as the administrator the image created,
//! its view of the replica set; and the few changes the operator makes (initiate, add
//! or remove a member, hand the primary over, the default write concern). Elections
//! are the replica set's own. The password reaches the shell through its environment
//! (`process.env`), never a command line.

mod bson;
pub(crate) mod wire;

use futures::future::join_all;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use serde::Deserialize;

use super::plan::{EngineState, ReplicaSetView};
use crate::engine::MONGODB_REPLICA_SET;
use crate::exec::{self, ExecError};

/// How long asking an instance may take (mongosh itself needs a second or two to
/// start): a hung one must not hold up a pass.
const ASK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(12);
/// How long greeting an instance over the wire protocol may take: the script itself
/// gives up on a silent server after two seconds per answer.
const GREET_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(8);
/// How long a hand-over may take: the primary waits up to this for a secondary to
/// catch up before it steps down.
const CATCH_UP_SECONDS: u32 = 20;
/// How long the stepped-down primary and the secondaries not chosen stay out of
/// elections, so the chosen one wins.
const STAY_OUT_SECONDS: u32 = 40;

/// How long moving the feature compatibility version may take: every member rewrites
/// its catalog.
const COMPATIBILITY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// Logs in as the administrator before the script's own statements.
const LOGIN: &str = "db.getSiblingDB('admin').auth(process.env.MONGO_INITDB_ROOT_USERNAME, process.env.MONGO_INITDB_ROOT_PASSWORD);\n";

/// The instance's view: its set, whether it takes writes, follows or recovers, the
/// primary it knows, how recent its last write is, and on a primary the configured
/// members, the default write concern, the time of the oldest entry its oplog still
/// holds and each member's state as it sees them.
const STATE: &str = r#"
const h = db.adminCommand({ hello: 1 });
let status = null;
const out = {
  set: h.setName || "",
  writable: !!h.isWritablePrimary,
  secondary: !!h.secondary,
  primary: h.primary || "",
  lastWrite: h.lastWrite && h.lastWrite.lastWriteDate ? h.lastWrite.lastWriteDate.getTime() : 0,
  members: [],
  majority: false,
  version: db.version(),
  compatibility: "",
  state: -1,
  oldest: 0,
  states: [],
};
if (out.set) {
  try { status = db.adminCommand({ replSetGetStatus: 1 }); out.state = status.myState; } catch (e) {}
}
if (out.writable && out.set) {
  out.members = db.adminCommand({ replSetGetConfig: 1 }).config.members.map((m) => m.host);
  const c = db.adminCommand({ getDefaultRWConcern: 1 });
  out.majority = !!(c.defaultWriteConcern && c.defaultWriteConcern.w === "majority");
  const f = db.adminCommand({ getParameter: 1, featureCompatibilityVersion: 1 });
  out.compatibility = (f.featureCompatibilityVersion && f.featureCompatibilityVersion.version) || "";
  const first = db.getSiblingDB("local").oplog.rs.find({}, { wall: 1 }).sort({ $natural: 1 }).limit(1).toArray()[0];
  out.oldest = first && first.wall ? first.wall.getTime() : 0;
  out.states = status ? status.members.map((m) => ({ host: m.name, state: m.state })) : [];
}
print(JSON.stringify(out));
"#;

/// The member state of one that is neither primary nor a secondary that reads: as a
/// member too stale to catch up stays.
const RECOVERING: i32 = 3;

fn no_state() -> i32 {
    -1
}

/// The answer to [`STATE`].
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Answer {
    set: String,
    writable: bool,
    secondary: bool,
    primary: String,
    last_write: u64,
    members: Vec<String>,
    majority: bool,
    #[serde(default)]
    version: String,
    #[serde(default)]
    compatibility: String,
    /// Its member state (`myState`), -1 when it has none.
    #[serde(default = "no_state")]
    state: i32,
    /// On a primary: the wall-clock time (ms) of its oplog's oldest entry.
    #[serde(default)]
    oldest: u64,
    /// On a primary: each member's state as it sees them.
    #[serde(default)]
    states: Vec<MemberState>,
}

/// A member's state (`replSetGetStatus.members[].state`) as the primary sees it.
#[derive(Deserialize)]
struct MemberState {
    host: String,
    state: i32,
}

/// Each member's state, by Pod, as the primary that answered sees them.
type MemberStates = Vec<(String, i32)>;

/// A member's address: its Pod's DNS name under the headless Service.
pub fn host(pod: &str, service: &str, namespace: &str, cluster_domain: &str) -> String {
    format!("{pod}.{service}.{namespace}.svc.{cluster_domain}:27017")
}

/// The Pod a member's address names.
fn pod_of(host: &str) -> Option<String> {
    host.split(['.', ':'])
        .next()
        .filter(|p| !p.is_empty())
        .map(str::to_owned)
}

/// Runs a script as the administrator; its output.
pub(crate) async fn shell(
    pods: &Api<Pod>,
    pod: &str,
    script: &str,
    within: std::time::Duration,
) -> Result<String, ExecError> {
    let script = format!("{LOGIN}{script}");
    exec::run_within(
        pods,
        pod,
        &[
            "mongosh",
            "--quiet",
            "--norc",
            "mongodb://127.0.0.1:27017/admin?directConnection=true&serverSelectionTimeoutMS=3000",
            "--eval",
            &script,
        ],
        within,
    )
    .await
}

/// Every running member's state, in the order of `members` (`None` for one that did
/// not answer). Each is greeted over the wire protocol; the one that says it is the
/// writable primary (two, for a moment after a partition) is then asked its full view
/// through mongosh, and the others learn from it whether they are recovering.
pub async fn states(pods: &Api<Pod>, members: &[String]) -> Vec<Option<EngineState>> {
    let greeted = join_all(members.iter().map(|pod| greet(pods, pod))).await;
    let viewed = join_all(
        members
            .iter()
            .zip(&greeted)
            .map(|(pod, greeting)| async move {
                let writable = greeting.as_ref().is_some_and(|state| state.primary);
                if writable {
                    Some(primary_view(pods, pod).await.ok())
                } else {
                    None
                }
            }),
    )
    .await;
    let seen: MemberStates = viewed
        .iter()
        .flatten()
        .flatten()
        .map(|(_, states)| states.clone())
        .next()
        .unwrap_or_default();
    greeted
        .into_iter()
        .zip(viewed)
        .zip(members)
        .map(|((greeting, view), pod)| match view {
            Some(view) => view.map(|(state, _)| state),
            None => greeting.map(|state| as_the_primary_sees(state, pod, &seen)),
        })
        .collect()
}

/// A member that is not the primary: recovering when the primary sees it so.
fn as_the_primary_sees(mut state: EngineState, pod: &str, seen: &MemberStates) -> EngineState {
    let recovering = seen
        .iter()
        .any(|(member, s)| member == pod && *s == RECOVERING);
    if let Some(view) = state.replica_set.as_mut() {
        view.recovering = recovering;
    }
    state
}

/// What the member answers before any login: `hello` and `buildInfo`.
async fn greet(pods: &Api<Pod>, pod: &str) -> Option<EngineState> {
    let script = wire::ask_script(&["hello", "buildInfo"]);
    let output = exec::run_within(pods, pod, &["bash", "-c", &script], GREET_TIMEOUT)
        .await
        .ok()?;
    let mut lines = output.lines().filter(|l| !l.trim().is_empty());
    let hello = wire::read_answer(lines.next()?)?;
    let build = wire::read_answer(lines.next()?)?;
    greeted_state(&hello, &build)
}

/// The state a member's `hello` and `buildInfo` answers give: all but what only the
/// primary's full view says (members, write concern, compatibility, oldest entry).
fn greeted_state(hello: &bson::Document, build: &bson::Document) -> Option<EngineState> {
    let secondary = hello.bool("secondary").unwrap_or(false);
    let last_write = hello
        .document("lastWrite")
        .and_then(|w| w.date_time("lastWriteDate"))
        .and_then(|ms| u64::try_from(ms).ok());
    Some(EngineState {
        primary: hello.bool("isWritablePrimary").unwrap_or(false),
        position: last_write.unwrap_or(0),
        upstream: secondary
            .then(|| hello.str("primary").and_then(pod_of))
            .flatten(),
        streaming: secondary,
        synchronous: false,
        log_kept_mb: None,
        oldest_log: None,
        history: None,
        replica_set: Some(ReplicaSetView {
            initiated: hello.str("setName").is_some_and(|s| !s.is_empty()),
            members: Vec::new(),
            version: build.str("version")?.to_owned(),
            compatibility: None,
            recovering: false,
        }),
    })
}

/// The writable primary's full view, and each member's state as it sees them.
async fn primary_view(
    pods: &Api<Pod>,
    pod: &str,
) -> Result<(EngineState, MemberStates), ExecError> {
    let output = shell(pods, pod, STATE, ASK_TIMEOUT).await?;
    parse_state(&output).ok_or_else(|| ExecError::Failed {
        pod: pod.to_owned(),
        stderr: format!("unexpected answer {output:?}"),
    })
}

/// Marks the member `pod`'s data to be emptied when its Pod starts again (the
/// replication script does it, never on the primary), so that it copies the set anew.
pub async fn mark_for_reseed(pods: &Api<Pod>, pod: &str) -> Result<(), ExecError> {
    exec::run(pods, pod, &["touch", &reseed_mark()])
        .await
        .map(|_| ())
}

/// The mark [`mark_for_reseed`] leaves: a file of this name at the data volume's root,
/// read by the replication script before mongod starts.
const RESEED_FILE: &str = "reseed";

fn reseed_mark() -> String {
    let data = crate::engine::data_layout(database_api::Engine::Mongodb, "").mount_path;
    format!("{data}/{RESEED_FILE}")
}

/// Makes `pod` a replica set of one member, itself; the others are added one by one.
/// Replicas copy from the primary, not from each other, as the other engines do.
pub async fn initiate(pods: &Api<Pod>, pod: &str, host: &str) -> Result<(), ExecError> {
    let script = format!(
        r#"const r = rs.initiate({{ _id: "{MONGODB_REPLICA_SET}", members: [{{ _id: 0, host: "{host}" }}], settings: {{ chainingAllowed: false }} }});
if (!r.ok) {{ throw new Error(r.errmsg); }}"#
    );
    shell(pods, pod, &script, ASK_TIMEOUT).await.map(|_| ())
}

/// Adds a member (it copies the data, then votes once it caught up).
pub async fn add(pods: &Api<Pod>, primary: &str, host: &str) -> Result<(), ExecError> {
    let script = format!(
        r#"const r = rs.add({{ host: "{host}" }}); if (!r.ok) {{ throw new Error(r.errmsg); }}"#
    );
    shell(pods, primary, &script, ASK_TIMEOUT).await.map(|_| ())
}

/// Removes a member from the set's configuration.
pub async fn remove(pods: &Api<Pod>, primary: &str, host: &str) -> Result<(), ExecError> {
    let script =
        format!(r#"const r = rs.remove("{host}"); if (!r.ok) {{ throw new Error(r.errmsg); }}"#);
    shell(pods, primary, &script, ASK_TIMEOUT).await.map(|_| ())
}

/// Keeps a secondary out of elections for a while, so another wins.
pub async fn stay_out(pods: &Api<Pod>, pod: &str) -> Result<(), ExecError> {
    let script = format!("db.adminCommand({{ replSetFreeze: {STAY_OUT_SECONDS} }});");
    shell(pods, pod, &script, ASK_TIMEOUT).await.map(|_| ())
}

/// Has the primary step down once a secondary has every write it acknowledged: it
/// stops taking writes, waits for one to catch up, and stays out of the next election.
pub async fn step_down(pods: &Api<Pod>, primary: &str) -> Result<(), ExecError> {
    let script = format!(
        r"const r = db.adminCommand({{ replSetStepDown: {STAY_OUT_SECONDS}, secondaryCatchUpPeriodSecs: {CATCH_UP_SECONDS} }});
if (!r.ok) {{ throw new Error(r.errmsg); }}"
    );
    let within = std::time::Duration::from_secs(u64::from(CATCH_UP_SECONDS) + 15);
    shell(pods, primary, &script, within).await.map(|_| ())
}

/// Acknowledges writes once a majority of members has them (sync), or once the
/// primary has (async): the set's default write concern.
pub async fn set_synchronous(pods: &Api<Pod>, primary: &str, on: bool) -> Result<(), ExecError> {
    let w = if on { r#""majority""# } else { "1" };
    let script = format!(
        r"const r = db.adminCommand({{ setDefaultRWConcern: 1, defaultWriteConcern: {{ w: {w} }} }});
if (!r.ok) {{ throw new Error(r.errmsg); }}"
    );
    shell(pods, primary, &script, ASK_TIMEOUT).await.map(|_| ())
}

/// Moves the set's feature compatibility version to `to` (`7.0`): from 7.0 on the
/// server asks to confirm, since the step cannot be undone without a downgrade
/// procedure.
pub async fn raise_compatibility(
    pods: &Api<Pod>,
    primary: &str,
    to: &str,
) -> Result<(), ExecError> {
    let confirm = if crate::engine::major(to).is_some_and(|m| m >= 7) {
        ", confirm: true"
    } else {
        ""
    };
    let script = format!(
        r#"const r = db.adminCommand({{ setFeatureCompatibilityVersion: "{to}"{confirm} }});
if (!r.ok) {{ throw new Error(r.errmsg); }}"#
    );
    shell(pods, primary, &script, COMPATIBILITY_TIMEOUT)
        .await
        .map(|_| ())
}

/// The printed answer into a state, and each member's state as the instance sees them.
fn parse_state(output: &str) -> Option<(EngineState, MemberStates)> {
    let line = output
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with('{'))?;
    let answer: Answer = serde_json::from_str(line).ok()?;
    let initiated = !answer.set.is_empty();
    let seen = answer
        .states
        .iter()
        .filter_map(|m| Some((pod_of(&m.host)?, m.state)))
        .collect();
    let state = EngineState {
        primary: answer.writable,
        position: answer.last_write,
        upstream: answer.secondary.then(|| pod_of(&answer.primary)).flatten(),
        streaming: answer.secondary,
        synchronous: answer.majority,
        log_kept_mb: None,
        oldest_log: (answer.oldest > 0).then_some(answer.oldest),
        history: None,
        replica_set: Some(ReplicaSetView {
            initiated,
            members: answer.members.iter().filter_map(|h| pod_of(h)).collect(),
            version: answer.version,
            compatibility: Some(answer.compatibility).filter(|c| !c.is_empty()),
            recovering: answer.state == RECOVERING,
        }),
    };
    Some((state, seen))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_replication_script_looks_for_the_reseed_mark_where_it_is_left() {
        let script = crate::engine::profile(database_api::Engine::Mongodb)
            .replication_script
            .expect("a replication script");
        let data = crate::engine::data_layout(database_api::Engine::Mongodb, "7.0").mount_path;
        assert!(script.contains(&format!("\ndata={data}\n")), "{script}");
        assert!(
            script.contains(&format!("\"$data/{RESEED_FILE}\"")),
            "{script}"
        );
        assert_eq!(reseed_mark(), format!("{data}/{RESEED_FILE}"));
    }

    #[test]
    fn a_primary_names_the_members_of_its_set() {
        let state = parse_state(
            r#"{"set":"rs0","writable":true,"secondary":false,"primary":"orders-0.orders.shop.svc.cluster.local:27017","lastWrite":1700000000123,"members":["orders-0.orders.shop.svc.cluster.local:27017","orders-1.orders.shop.svc.cluster.local:27017"],"majority":true,"version":"7.0.14","compatibility":"6.0","state":1,"oldest":1699999000000,"states":[{"host":"orders-0.orders.shop.svc.cluster.local:27017","state":1},{"host":"orders-1.orders.shop.svc.cluster.local:27017","state":3}]}"#,
        )
        .expect("parsed");
        let (state, seen) = state;
        assert_eq!(
            seen,
            [("orders-0".to_owned(), 1), ("orders-1".to_owned(), 3)]
        );
        assert!(state.primary && state.synchronous);
        assert_eq!(state.position, 1_700_000_000_123);
        assert_eq!(state.oldest_log, Some(1_699_999_000_000));
        let set = state.replica_set.expect("a replica set");
        assert!(!set.recovering);
        assert!(set.initiated);
        assert_eq!(set.members, ["orders-0", "orders-1"]);
        assert_eq!(set.version, "7.0.14");
        assert_eq!(set.compatibility.as_deref(), Some("6.0"));
    }

    #[test]
    fn a_secondary_follows_the_primary_it_knows() {
        let state = parse_state(
            "warning first\n{\"set\":\"rs0\",\"writable\":false,\"secondary\":true,\"primary\":\"orders-2.orders.shop.svc.cluster.local:27017\",\"lastWrite\":5,\"members\":[],\"majority\":false}\n",
        )
        .expect("parsed")
        .0;
        assert!(!state.primary && state.streaming);
        assert_eq!(state.upstream.as_deref(), Some("orders-2"));
        assert_eq!(state.oldest_log, None);
    }

    #[test]
    fn a_member_too_stale_to_catch_up_recovers_with_its_last_write() {
        let state = parse_state(
            r#"{"set":"rs0","writable":false,"secondary":false,"primary":"orders-0.orders.shop.svc.cluster.local:27017","lastWrite":42,"members":[],"majority":false,"version":"6.0.5","compatibility":"","state":3,"oldest":0}"#,
        )
        .expect("parsed")
        .0;
        assert!(!state.primary && !state.streaming);
        assert_eq!(state.position, 42);
        assert!(state.replica_set.expect("a view").recovering);
    }

    #[test]
    fn an_instance_without_a_configuration_is_not_initiated() {
        let state = parse_state(
            r#"{"set":"","writable":false,"secondary":false,"primary":"","lastWrite":0,"members":[],"majority":false}"#,
        )
        .expect("parsed")
        .0;
        assert!(!state.replica_set.expect("a view").initiated);
        assert_eq!(state.upstream, None);
        assert_eq!(
            parse_state("MongoServerError: Authentication failed."),
            None
        );
    }

    /// The state a member's two answers, as the greeting script printed them, give.
    fn greeted(answers: &str) -> EngineState {
        let mut lines = answers.lines();
        let hello = wire::read_answer(lines.next().expect("hello")).expect("read");
        let build = wire::read_answer(lines.next().expect("buildInfo")).expect("read");
        greeted_state(&hello, &build).expect("a state")
    }

    #[test]
    fn a_greeted_primary_takes_writes_and_says_its_version() {
        // Answers of mongod 6.0 in a set of three, printed by the greeting script.
        let state = greeted(include_str!("wire/primary-6.0.hex"));
        assert!(state.primary && !state.streaming);
        assert_eq!(state.upstream, None);
        assert!(state.position > 1_700_000_000_000, "{}", state.position);
        let view = state.replica_set.expect("a view");
        assert!(view.initiated && !view.recovering);
        assert!(view.version.starts_with("6.0."), "{}", view.version);
        assert!(view.members.is_empty() && view.compatibility.is_none());
    }

    #[test]
    fn a_greeted_secondary_follows_the_primary_it_names() {
        let primary = greeted(include_str!("wire/primary-6.0.hex"));
        let state = greeted(include_str!("wire/secondary-6.0.hex"));
        assert!(!state.primary && state.streaming);
        assert_eq!(state.upstream.as_deref(), Some("orders-0"));
        assert!(state.position > 0 && state.position <= primary.position);
        assert!(state.replica_set.expect("a view").initiated);
    }

    #[test]
    fn a_member_recovers_when_the_primary_sees_it_so() {
        let (greeted, _) = parse_state(
            r#"{"set":"rs0","writable":false,"secondary":false,"primary":"","lastWrite":42,"members":[],"majority":false,"version":"6.0.5"}"#,
        )
        .expect("parsed");
        let seen = vec![
            ("orders-0".to_owned(), 1),
            ("orders-2".to_owned(), RECOVERING),
        ];
        let view = |pod: &str| {
            as_the_primary_sees(greeted.clone(), pod, &seen)
                .replica_set
                .expect("a view")
                .recovering
        };
        assert!(view("orders-2"));
        assert!(!view("orders-1"), "a member the primary does not list");
        assert!(!view("orders-0"));
        assert!(
            !as_the_primary_sees(greeted.clone(), "orders-2", &Vec::new())
                .replica_set
                .expect("a view")
                .recovering,
            "without a primary's view"
        );
    }

    #[test]
    fn members_are_addressed_by_their_pods_dns_names() {
        let address = host("orders-1", "orders", "shop", "cluster.local");
        assert_eq!(address, "orders-1.orders.shop.svc.cluster.local:27017");
        assert_eq!(pod_of(&address).as_deref(), Some("orders-1"));
    }
}
