//! A mongodb member too stale to catch up, on real servers: its own target, so the
//! gigabyte its primary writes and the member's copy of the set share the machine with
//! no other replica set.

mod common;
mod mongodb_set;

use std::time::Duration;

use mongodb_set::{assert_secondary_with, three_members_with_document_1};
use testenv::toolkit::failover::{assert_primary, replicated};
use testenv::toolkit::real_tier::{REAL_WAIT, exec, hang_server, wake_server};
use testenv::toolkit::wait::Wait;

/// A member's state, last write, and the oldest entry its oplog holds.
const OPLOG_VIEW: &str = r#"mongosh --quiet --eval '
db.getSiblingDB("admin").auth(process.env.MONGO_INITDB_ROOT_USERNAME, process.env.MONGO_INITDB_ROOT_PASSWORD);
const s = db.adminCommand({ replSetGetStatus: 1 });
const first = db.getSiblingDB("local").oplog.rs.find({}, { wall: 1 }).sort({ $natural: 1 }).limit(1).toArray()[0];
print(JSON.stringify({ state: s.myState, lastWrite: db.hello().lastWrite.lastWriteDate, oldest: first && first.wall, sync: s.syncSourceHost }))'"#;

/// Run on the primary while member `stopped` fetches nothing: rewrites sixteen documents
/// of 1 MiB until the oldest entry each other member's oplog holds is newer than the
/// script's start, so the stopped member (whose last write is older) lacks entries that no
/// member it could sync from still keeps.
///
/// mongod truncates its oplog only behind its last checkpoint (taken once a minute), so
/// volume alone does not do it: past the oplog's size the script asks every other member
/// for a checkpoint (`fsync`) after each batch and writes at a walk until the truncations
/// come. The same sixteen documents keep the data files small; each rewrite differs, so
/// none is a no-op that the oplog would skip.
fn outgrow_the_oplogs(stopped: &str) -> String {
    format!(
        r#"mongosh --quiet --eval '
const user = process.env.MONGO_INITDB_ROOT_USERNAME, password = process.env.MONGO_INITDB_ROOT_PASSWORD;
db.getSiblingDB("admin").auth(user, password);
const members = rs.conf().members.map(m => m.host).filter(host => !host.startsWith("{stopped}."))
  .map(host => new Mongo("mongodb://" + encodeURIComponent(user) + ":" + encodeURIComponent(password) + "@" + host + "/?authSource=admin&directConnection=true"));
const oldest = member => member.getDB("local").oplog.rs.find({{}}, {{ wall: 1 }}).sort({{ $natural: 1 }}).limit(1).next().wall;
const filler = db.getSiblingDB("app").filler;
const start = new Date();
const deadline = Date.now() + 480 * 1000;
const most = db.getSiblingDB("local").oplog.rs.stats().maxSize / (1 << 20);
const pad = "x".repeat(1 << 20);
let written = 0;
while (members.some(member => oldest(member) <= start)) {{
  if (Date.now() > deadline) {{
    throw new Error("an oplog still holds its first entries after " + written + " MiB in 480 s");
  }}
  filler.bulkWrite(Array.from({{ length: 16 }}, (_, i) => ({{
    replaceOne: {{ filter: {{ _id: i }}, replacement: {{ pad, written }}, upsert: true }},
  }})));
  written += 16;
  if (written > most) {{
    members.forEach(member => member.getDB("admin").runCommand({{ fsync: 1 }}));
    sleep(500);
  }}
}}
print("outgrown on " + members.length + " members after " + written + " MiB, an oplog holding at most " + most + " MiB")'"#
    )
}

#[tokio::test]
async fn a_member_too_stale_to_catch_up_is_emptied_and_copies_the_set_anew() {
    let env = three_members_with_document_1().await;
    assert_secondary_with(&env, "orders-2", 1).await;

    // The member fetches nothing while the primary writes more than its oplog holds.
    let pid = hang_server(&env, "orders-2", "mongod").await;
    let outgrown = exec(
        &env,
        "orders-0",
        &["sh", "-c", &outgrow_the_oplogs("orders-2")],
    )
    .await
    .expect("the oplogs outgrown");
    eprintln!("{}", outgrown.trim());
    wake_server(pid);
    let resumed = std::time::Instant::now();
    // The member reads on as a secondary until its fetcher's cursor on the primary
    // fails (some 40 s here), then recovers, too stale, until the controller marks it.
    Wait::new("Reseeding for orders-2", REAL_WAIT)
        .every(Duration::from_secs(15))
        .until_ok(|| async {
            let copied = env
                .events_of("Database", "orders")
                .await
                .iter()
                .any(|(_, reason, note)| reason == "Reseeding" && note.starts_with("orders-2 "));
            if copied {
                return Ok(());
            }
            // What the members say, for a failure's message.
            let mut said = Vec::new();
            for pod in ["orders-0", "orders-1", "orders-2"] {
                said.push(format!(
                    "{pod}: {:?}",
                    exec(&env, pod, &["sh", "-c", OPLOG_VIEW]).await
                ));
            }
            Err(said.join("; "))
        })
        .await;
    // Emptied, the member copies the set and reads as a secondary with every document.
    assert_secondary_with(&env, "orders-2", 1).await;
    eprintln!(
        "orders-2 copied the set anew and a secondary {:.1?} after it resumed",
        resumed.elapsed()
    );
    replicated(&env, "orders").await;
    assert_primary(&env, "orders-0").await;
}
