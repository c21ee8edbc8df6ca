//! One-off client Pods on the real tier: an engine's own client run with a Database's
//! connection Secret in its environment and projected as a Service Binding, as an
//! application would; and a writer whose
//! acknowledged writes can be checked after a fault.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, DeleteParams, LogParams, PostParams};
use serde_json::json;

/// The connection Secret's keys a client Pod gets, each as an upper-case variable
/// (`ro-uri` as `RO_URI`).
const CONNECTION_KEYS: [&str; 7] = [
    "uri", "host", "port", "username", "password", "database", "ro-uri",
];

/// Where a client Pod finds its Database's binding, as `$SERVICE_BINDING_ROOT`.
pub const BINDING_ROOT: &str = "/bindings";

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("the client Pod {pod}: {source}")]
    Api {
        pod: String,
        #[source]
        source: kube::Error,
    },
    #[error("the client Pod {pod} did not finish within {} seconds; its output so far: {output}", .limit.as_secs())]
    TimedOut {
        pod: String,
        limit: Duration,
        output: String,
    },
}

/// A client Pod to run.
pub struct ClientPod<'a> {
    pub namespace: &'a str,
    /// The Database whose `<db>-connection` Secret fills the environment.
    pub db: &'a str,
    pub image: &'a str,
    /// Run by `sh -c`.
    pub script: &'a str,
    /// More variables, each `(NAME, secret, key)`.
    pub more: &'a [(&'a str, &'a str, &'a str)],
    pub limit: Duration,
}

impl ClientPod<'_> {
    /// Runs the Pod (uid 999, within the restricted Pod Security level) to its end and
    /// returns whether it succeeded and its output; the Pod is deleted afterwards.
    pub async fn run(&self, client: &Client) -> Result<(bool, String), ClientError> {
        let pods: Api<Pod> = Api::namespaced(client.clone(), self.namespace);
        let name = format!("client-{}", unique());
        let api = |source| ClientError::Api {
            pod: name.clone(),
            source,
        };
        pods.create(&PostParams::default(), &self.pod(&name))
            .await
            .map_err(api)?;
        let started = std::time::Instant::now();
        let succeeded = loop {
            let phase = pods
                .get(&name)
                .await
                .map_err(api)?
                .status
                .and_then(|s| s.phase);
            match phase.as_deref() {
                Some("Succeeded") => break true,
                Some("Failed") => break false,
                _ if started.elapsed() > self.limit => {
                    let output = pods
                        .logs(&name, &LogParams::default())
                        .await
                        .unwrap_or_else(|err| format!("(not read: {err})"));
                    let _ = pods
                        .delete(&name, &DeleteParams::default().grace_period(0))
                        .await;
                    return Err(ClientError::TimedOut {
                        pod: name,
                        limit: self.limit,
                        output,
                    });
                }
                _ => tokio::time::sleep(Duration::from_millis(250)).await,
            }
        };
        let logs = pods
            .logs(&name, &LogParams::default())
            .await
            .unwrap_or_default();
        let _ = pods
            .delete(&name, &DeleteParams::default().grace_period(0))
            .await;
        Ok((succeeded, logs))
    }

    fn pod(&self, name: &str) -> Pod {
        let connection = format!("{}-connection", self.db);
        let env: Vec<serde_json::Value> = CONNECTION_KEYS
            .iter()
            .map(|key| (key.to_uppercase().replace('-', "_"), connection.as_str(), *key))
            .chain(
                self.more
                    .iter()
                    .map(|(name, secret, key)| ((*name).to_owned(), *secret, *key)),
            )
            .map(|(name, secret, key)| {
                json!({"name": name, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}})
            })
            .chain(std::iter::once(
                json!({"name": "SERVICE_BINDING_ROOT", "value": BINDING_ROOT}),
            ))
            .collect();
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": self.namespace},
            "spec": {
                "restartPolicy": "Never",
                "automountServiceAccountToken": false,
                "securityContext": {"runAsNonRoot": true, "runAsUser": 999, "runAsGroup": 999, "seccompProfile": {"type": "RuntimeDefault"}},
                "containers": [{
                    "name": "client",
                    "image": self.image,
                    "imagePullPolicy": "IfNotPresent",
                    "command": ["sh", "-c", self.script],
                    "env": env,
                    // mongosh keeps its history under HOME.
                    "workingDir": "/tmp",
                    "securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}},
                    "volumeMounts": [{"name": "binding", "mountPath": format!("{BINDING_ROOT}/{}", self.db), "readOnly": true}],
                }],
                // The Secret projected as the Service Binding specification has a
                // workload see it: one file per key under $SERVICE_BINDING_ROOT/<name>.
                "volumes": [{"name": "binding", "secret": {"secretName": connection}}],
            },
        }))
        .expect("the client Pod's shape is fixed")
    }
}

/// A `sh` script for a postgres client Pod: writes ids `first`, `first + 1`, ... through
/// `$URI` for `seconds`, one connection each (so every write finds the current
/// primary), and prints `ack <id> <unix milliseconds>` for each the server acknowledged.
/// Successive writers into one table need ranges that do not overlap.
pub fn postgres_writer(seconds: u32, first: u32) -> String {
    format!(
        r#"export PGCONNECT_TIMEOUT=3
psql "$URI" -v ON_ERROR_STOP=1 -qc "CREATE TABLE IF NOT EXISTS writes (id int PRIMARY KEY)"
end=$(( $(date +%s) + {seconds} )); i={start}
while [ "$(date +%s)" -lt "$end" ]; do
  i=$((i + 1))
  if psql "$URI" -v ON_ERROR_STOP=1 -qtAc "INSERT INTO writes VALUES ($i)" >/dev/null 2>&1; then echo "ack $i $(date +%s%3N)"; fi
  sleep 0.05
done"#,
        start = first.saturating_sub(1)
    )
}

/// The mysql client takes no URI: this splits `mysql://user:password@host:port/database`
/// (from `$URI`) and defines `sql "<statement>"` on it, one connection per call.
pub const MYSQL_FROM_URI: &str = r#"rest=${URI#mysql://}; credentials=${rest%%@*}; user=${credentials%%:*}; password=${credentials#*:}; rest=${rest#*@}; address=${rest%%/*}; database=${rest#*/}; host=${address%%:*}; port=${address#*:}; export MYSQL_PWD="$password"; sql() { mysql -h "$host" -P "$port" -u "$user" --connect-timeout=3 -N -B "$database" -e "$1"; }"#;

/// [`postgres_writer`] for a mysql client Pod.
pub fn mysql_writer(seconds: u32, first: u32) -> String {
    format!(
        r#"{MYSQL_FROM_URI}
sql "CREATE TABLE IF NOT EXISTS writes (id int PRIMARY KEY)"
end=$(( $(date +%s) + {seconds} )); i={start}
while [ "$(date +%s)" -lt "$end" ]; do
  i=$((i + 1))
  if sql "INSERT INTO writes VALUES ($i)" >/dev/null 2>&1; then echo "ack $i $(date +%s%3N)"; fi
  sleep 0.05
done"#,
        start = first.saturating_sub(1)
    )
}

/// Reads back every id in the mysql writer's table.
pub fn mysql_written() -> String {
    format!(r#"{MYSQL_FROM_URI}; sql "SELECT id FROM writes""#)
}

/// [`postgres_writer`] for a mongo client Pod: one `mongosh`, a new connection through
/// `$URI` for each write (so every write finds the current primary), the collection
/// `writes` of the application's database.
pub fn mongodb_writer(seconds: u32, first: u32) -> String {
    format!(
        r#"mongosh --nodb --quiet --eval '
const uri = process.env.URI + "&directConnection=true&serverSelectionTimeoutMS=2000&connectTimeoutMS=2000";
const end = Date.now() + {seconds} * 1000;
let i = {start};
while (Date.now() < end) {{
  i += 1;
  try {{
    const m = new Mongo(uri);
    m.getDB("app").writes.insertOne({{ _id: i }});
    print("ack " + i + " " + Date.now());
    m.close();
  }} catch (e) {{}}
  sleep(50);
}}'"#,
        start = first.saturating_sub(1)
    )
}

/// Reads back every id in the mongo writer's collection, one a line, from the primary.
pub const MONGODB_WRITTEN: &str =
    r#"mongosh "$URI" --quiet --eval 'db.writes.find().forEach((d) => print(d._id))'"#;

/// Reads back every id in the writer's table.
pub const POSTGRES_WRITTEN: &str = r#"psql "$URI" -v ON_ERROR_STOP=1 -tAc "SELECT id FROM writes""#;

/// One acknowledged write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ack {
    pub id: u32,
    /// When it was acknowledged, in Unix milliseconds.
    pub at_ms: u64,
}

/// The acknowledged writes a writer printed.
pub fn acknowledged(output: &str) -> Vec<Ack> {
    output
        .lines()
        .filter_map(|l| {
            let mut fields = l.strip_prefix("ack ")?.split_whitespace();
            Some(Ack {
                id: fields.next()?.parse().ok()?,
                at_ms: fields.next()?.parse().ok()?,
            })
        })
        .collect()
}

/// The acknowledged writes missing from `stored` (the output of [`POSTGRES_WRITTEN`]).
pub fn lost(acknowledged: &[Ack], stored: &str) -> Vec<u32> {
    let stored: std::collections::BTreeSet<u32> = stored
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect();
    acknowledged
        .iter()
        .map(|a| a.id)
        .filter(|id| !stored.contains(id))
        .collect()
}

fn unique() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    format!("{nanos:x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acknowledged_writes_are_read_and_the_missing_ones_found() {
        let output = "ack 1 1000\nERROR: x\nack 2 1050\nack 3 1100\n";
        let acks = acknowledged(output);
        assert_eq!(acks.len(), 3);
        assert_eq!(acks[1], Ack { id: 2, at_ms: 1050 });
        assert_eq!(lost(&acks, " 1\n 3\n"), [2]);
        assert!(lost(&acks, "1\n2\n3\n4\n").is_empty());
    }
}
