//! The one way a pass writes a Database's owned objects. Each desired object goes
//! through [`Applier::apply`] (skipped when its hash matches what exists, counted once
//! here when written); once they all have, [`Applier::prune`] deletes every observed
//! object this Database controls that the pass did not want: a budget a single instance
//! no longer needs, a configuration file whose settings were removed, the scripts of a
//! layout that has none. For a paused Database the applier holds: it compares each
//! object and notes what differs, and writes and deletes nothing. An object the
//! Database does not control is never deleted, and never written: the preflight stops
//! the pass before the first write when one is in the way, and a create (a new
//! Database's first pass reads nothing, see `first_pass`, or one that races with someone
//! else's) refuses to apply over it.

use std::collections::HashSet;
use std::fmt::Debug;
use std::sync::Mutex;

use database_api::Database;
use kube::api::{Api, DeleteParams, Preconditions};
use kube::{Resource, ResourceExt as _};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::conflicts::is_controlled_by;
use super::seen::{Seen, fresh};
use crate::context::Context;
use crate::error::Error;
use crate::objects::{Applied, apply, delete_if_present, delete_with, hash_of, would_change};

/// Whether a pass writes, or only notes what it would write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Write,
    /// A paused Database: every object is compared with what the spec asks for and
    /// left as it is; what differs is noted for the Paused condition.
    Hold,
}

/// Applies one Database's owned objects in one pass and prunes what it no longer wants.
pub(crate) struct Applier<'a> {
    ctx: &'a Context,
    owner: &'a Database,
    mode: Mode,
    /// Kind and name of every object this pass applied or otherwise keeps.
    wanted: Mutex<HashSet<(String, String)>>,
    /// In hold mode, what the pass would have written or deleted.
    held: Mutex<Vec<String>>,
}

impl<'a> Applier<'a> {
    pub(crate) fn new(ctx: &'a Context, owner: &'a Database) -> Self {
        Self {
            ctx,
            owner,
            mode: Mode::Write,
            wanted: Mutex::default(),
            held: Mutex::default(),
        }
    }

    /// An applier that writes nothing (see [`Mode::Hold`]).
    pub(crate) fn holding(ctx: &'a Context, owner: &'a Database) -> Self {
        Self {
            mode: Mode::Hold,
            ..Self::new(ctx, owner)
        }
    }

    pub(crate) fn is_holding(&self) -> bool {
        self.mode == Mode::Hold
    }

    /// Notes, in hold mode, that the object of kind `K` named `name` would be written
    /// (`deleted` when it would go).
    pub(crate) fn note_held<K: Resource<DynamicType = ()>>(&self, name: &str, deleted: bool) {
        let what = format!(
            "{} {name}{}",
            K::kind(&()),
            if deleted { " (to be deleted)" } else { "" }
        );
        if let Ok(mut held) = self.held.lock() {
            held.push(what);
        }
    }

    /// What a holding pass left as it is, sorted.
    pub(crate) fn held(&self) -> Vec<String> {
        let mut held = self.held.lock().map(|h| h.clone()).unwrap_or_default();
        held.sort();
        held
    }

    /// The context the pass runs in.
    pub(crate) fn context(&self) -> &'a Context {
        self.ctx
    }

    /// Applies `desired` unless `observed` already matches it, and marks it wanted.
    pub(crate) async fn apply<K>(
        &self,
        api: &Api<K>,
        desired: &K,
        observed: Option<&K>,
    ) -> Result<(K, Applied), Error>
    where
        K: Resource<DynamicType = ()> + Serialize + DeserializeOwned + Clone + Debug,
    {
        self.keep::<K>(&desired.name_any());
        if self.is_holding() {
            if let (Some(current), false) = (observed, would_change(desired, observed)?) {
                self.ctx.ledger.verified::<K>(current.meta());
                return Ok((current.clone(), Applied::Unchanged));
            }
            self.note_held::<K>(&desired.name_any(), false);
            return Ok((observed.unwrap_or(desired).clone(), Applied::Held));
        }
        let (object, applied) = apply(api, desired, observed).await?;
        if applied != Applied::Unchanged {
            self.ctx.metrics.wrote("apply");
        }
        self.ctx.ledger.verified::<K>(object.meta());
        Ok((object, applied))
    }

    /// [`Applier::apply`] against what the pass saw of the object. What it saw may be
    /// the API server's cache or the ledger's word: enough to find it unchanged, but
    /// a write starts from the object read again.
    pub(crate) async fn apply_seen<K>(
        &self,
        api: &Api<K>,
        desired: &K,
        seen: &Seen<K>,
    ) -> Result<Applied, Error>
    where
        K: Resource<DynamicType = ()> + Serialize + DeserializeOwned + Clone + Debug,
    {
        if self.unchanged(desired, seen)? {
            return Ok(Applied::Unchanged);
        }
        let current = fresh(api, seen).await?;
        let (_, applied) = self.apply(api, desired, current.as_ref()).await?;
        Ok(applied)
    }

    /// Whether applying `desired` over what the pass saw would change nothing: an
    /// unread object verified with `desired`'s hash, or a read one that matches it.
    /// Such an object is marked wanted (and noted in the ledger).
    pub(crate) fn unchanged<K>(&self, desired: &K, seen: &Seen<K>) -> Result<bool, Error>
    where
        K: Resource<DynamicType = ()> + Serialize,
    {
        let unchanged = match seen {
            Seen::Missing => false,
            Seen::Unread { verified, .. } => hash_of(desired)? == Some(verified.hash),
            Seen::Read(current) => {
                let unchanged = !would_change(desired, Some(current))?;
                if unchanged {
                    self.ctx.ledger.verified::<K>(current.meta());
                }
                unchanged
            }
        };
        if unchanged {
            self.keep::<K>(&desired.name_any());
        }
        Ok(unchanged)
    }

    /// Marks the object of kind `K` named `name` wanted without applying it (one that
    /// is written once and then left alone, as the credentials Secret).
    pub(crate) fn keep<K: Resource<DynamicType = ()>>(&self, name: &str) {
        if let Ok(mut wanted) = self.wanted.lock() {
            wanted.insert((K::kind(&()).into_owned(), name.to_owned()));
        }
    }

    fn is_wanted<K: Resource<DynamicType = ()>>(&self, name: &str) -> bool {
        self.wanted.lock().map_or(true, |w| {
            w.contains(&(K::kind(&()).into_owned(), name.to_owned()))
        })
    }

    /// Deletes `object` so it can be created anew with a field the API server never
    /// changes in place; only that object (its uid), and only when this Database
    /// controls it.
    pub(crate) async fn remove<K>(&self, api: &Api<K>, object: &K) -> Result<(), Error>
    where
        K: Resource<DynamicType = ()> + DeserializeOwned + Clone + Debug,
    {
        let name = object.name_any();
        if !is_controlled_by(object.meta(), self.owner) {
            return Err(Error::NotControlled {
                kind: K::kind(&()).into_owned(),
                name,
            });
        }
        if self.is_holding() {
            self.note_held::<K>(&name, true);
            return Ok(());
        }
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: object.meta().uid.clone(),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        if delete_with(api, &name, &params).await? {
            self.ctx.metrics.wrote("delete");
        }
        Ok(())
    }

    /// [`Applier::prune`] of what the pass saw: an object it no longer wants is read
    /// again before it is deleted.
    pub(crate) async fn prune_seen<K>(&self, api: &Api<K>, seen: &Seen<K>) -> Result<(), Error>
    where
        K: Resource<DynamicType = ()> + DeserializeOwned + Clone + Debug,
    {
        let name = match seen {
            Seen::Missing => return Ok(()),
            Seen::Read(object) => object.name_any(),
            Seen::Unread { name, .. } => name.clone(),
        };
        if self.is_wanted::<K>(&name) {
            return Ok(());
        }
        self.prune(api, fresh(api, seen).await?.as_ref()).await
    }

    /// Deletes `observed` when this pass did not want it and this Database controls it.
    pub(crate) async fn prune<K>(&self, api: &Api<K>, observed: Option<&K>) -> Result<(), Error>
    where
        K: Resource<DynamicType = ()> + DeserializeOwned + Clone + Debug,
    {
        let Some(object) = observed else {
            return Ok(());
        };
        let name = object.name_any();
        if self.is_wanted::<K>(&name) || !is_controlled_by(object.meta(), self.owner) {
            return Ok(());
        }
        if self.is_holding() {
            self.note_held::<K>(&name, true);
            return Ok(());
        }
        if delete_if_present(api, &name).await? {
            self.ctx.metrics.wrote("delete");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::api::policy::v1::PodDisruptionBudget;
    use serde_json::json;
    use std::sync::Arc;
    use testenv::scripted::ScriptedApiServer;

    use crate::context::Settings;
    use crate::metrics::Metrics;

    const MAPS: &str = "/api/v1/namespaces/shop/configmaps";

    /// A context whose client the scripted server answers.
    fn context(server: &ScriptedApiServer) -> Context {
        Context::new(
            server.client(),
            Settings::default(),
            Arc::new(Metrics::default()),
            None,
        )
    }

    fn owner() -> Database {
        let mut db = testenv::toolkit::fixtures::database(
            "orders",
            &json!({"engine": "postgres", "version": "17", "storage": "1Gi"}),
        );
        db.metadata.namespace = Some("shop".into());
        db.metadata.uid = Some("a1b2c3".into());
        db
    }

    fn map(name: &str, owner_uid: Option<&str>) -> ConfigMap {
        let owners = owner_uid.map(|uid| {
            json!([{"apiVersion": "mycompany.io/v1", "kind": "Database", "name": "orders",
                    "uid": uid, "controller": true}])
        });
        serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "shop", "ownerReferences": owners},
        }))
        .expect("a ConfigMap")
    }

    #[tokio::test]
    async fn what_the_pass_did_not_want_is_pruned_only_when_this_database_controls_it() {
        let server = ScriptedApiServer::new();
        let (ours, wanted, theirs) = (
            map("orders-config", Some("a1b2c3")),
            map("orders-topology", Some("a1b2c3")),
            map("orders-init", None),
        );
        for object in [&ours, &wanted, &theirs] {
            let path = format!("{MAPS}/{}", object.name_any());
            server.holds(&path, serde_json::to_value(object).expect("JSON"));
        }
        let ctx = context(&server);
        let db = owner();
        let applier = Applier::new(&ctx, &db);
        let maps: Api<ConfigMap> = Api::namespaced(server.client(), "shop");
        applier.keep::<ConfigMap>("orders-topology");
        // Another kind with the same name is not the ConfigMap wanted.
        applier.keep::<PodDisruptionBudget>("orders-config");
        for observed in [&ours, &wanted, &theirs] {
            applier.prune(&maps, Some(observed)).await.expect("pruned");
        }
        let deleted: Vec<String> = server.writes().into_iter().map(|w| w.path).collect();
        assert_eq!(deleted, [format!("{MAPS}/orders-config")]);
        assert!(
            server.object(&format!("{MAPS}/orders-init")).is_some(),
            "never someone else's"
        );
        assert!(
            ctx.metrics
                .encode()
                .contains("writes_total{action=\"delete\"} 1")
        );
    }

    #[tokio::test]
    async fn an_apply_that_changes_nothing_is_not_written_or_counted() {
        let server = ScriptedApiServer::new();
        let ctx = context(&server);
        let db = owner();
        let applier = Applier::new(&ctx, &db);
        let maps: Api<ConfigMap> = Api::namespaced(server.client(), "shop");
        let desired = map("orders-topology", Some("a1b2c3"));
        let (created, first) = applier.apply(&maps, &desired, None).await.expect("created");
        assert_eq!(first, Applied::Created);
        let (_, second) = applier
            .apply(&maps, &desired, Some(&created))
            .await
            .expect("same");
        assert_eq!(second, Applied::Unchanged);
        assert_eq!(server.writes().len(), 1);
        assert!(
            ctx.metrics
                .encode()
                .contains("writes_total{action=\"apply\"} 1")
        );
        assert!(applier.is_wanted::<ConfigMap>("orders-topology"));
    }

    #[tokio::test]
    async fn a_holding_applier_writes_nothing_and_notes_what_differs() {
        let server = ScriptedApiServer::new();
        let ctx = context(&server);
        let db = owner();
        let maps: Api<ConfigMap> = Api::namespaced(server.client(), "shop");
        // An object as a writing pass left it: held, it matches.
        let (current, _) = Applier::new(&ctx, &db)
            .apply(&maps, &map("orders-topology", Some("a1b2c3")), None)
            .await
            .expect("created");
        let writes_before = server.writes().len();
        let applier = Applier::holding(&ctx, &db);
        let (_, same) = applier
            .apply(
                &maps,
                &map("orders-topology", Some("a1b2c3")),
                Some(&current),
            )
            .await
            .expect("compared");
        assert_eq!(same, Applied::Unchanged);
        let mut changed = map("orders-topology", Some("a1b2c3"));
        changed.data = Some([("primary".to_owned(), "orders-1".to_owned())].into());
        let (_, differs) = applier
            .apply(&maps, &changed, Some(&current))
            .await
            .expect("compared");
        assert_eq!(differs, Applied::Held);
        applier
            .prune(&maps, Some(&map("orders-config", Some("a1b2c3"))))
            .await
            .expect("compared");
        assert_eq!(
            server.writes().len(),
            writes_before,
            "{:?}",
            server.writes()
        );
        assert_eq!(
            applier.held(),
            [
                "ConfigMap orders-config (to be deleted)",
                "ConfigMap orders-topology"
            ]
        );
    }

    /// The watch's report of `object`'s version, as the owned objects' watches make it.
    fn watched(ctx: &Context, object: &ConfigMap) {
        let seen = kube::core::PartialObjectMeta::<ConfigMap> {
            metadata: object.metadata.clone(),
            ..Default::default()
        };
        ctx.ledger
            .watched(None, &kube::runtime::watcher::Event::Apply(seen));
    }

    #[tokio::test]
    async fn an_object_the_ledger_vouches_for_is_neither_read_nor_written_until_wanted_otherwise() {
        let server = ScriptedApiServer::new();
        let ctx = context(&server);
        let db = owner();
        let maps: Api<ConfigMap> = Api::namespaced(server.client(), "shop");
        let desired = map("orders-topology", Some("a1b2c3"));
        let (created, _) = Applier::new(&ctx, &db)
            .apply(&maps, &desired, None)
            .await
            .expect("created");
        let seen = |ctx: &Context| {
            let verified = ctx
                .ledger
                .current::<ConfigMap>("shop", "orders-topology")
                .expect("vouched for");
            Seen::Unread {
                name: "orders-topology".into(),
                verified,
            }
        };
        // Until the watch reports the write, the ledger vouches for nothing.
        assert!(
            ctx.ledger
                .current::<ConfigMap>("shop", "orders-topology")
                .is_none()
        );
        watched(&ctx, &created);
        let requests_before = server.requests().len();

        let applier = Applier::new(&ctx, &db);
        let same = applier
            .apply_seen(&maps, &desired, &seen(&ctx))
            .await
            .expect("same");
        assert_eq!(same, Applied::Unchanged);
        assert_eq!(
            server.requests().len(),
            requests_before,
            "no request at all"
        );
        assert!(applier.is_wanted::<ConfigMap>("orders-topology"));

        let mut changed = desired.clone();
        changed.data = Some([("primary".to_owned(), "orders-1".to_owned())].into());
        let rewritten = applier
            .apply_seen(&maps, &changed, &seen(&ctx))
            .await
            .expect("applied");
        assert_eq!(rewritten, Applied::Updated);
        let methods: Vec<String> = server.requests()[requests_before..]
            .iter()
            .map(|r| r.method.to_string())
            .collect();
        assert_eq!(methods, ["GET", "PATCH"], "read, then written");
    }

    #[tokio::test]
    async fn an_unread_object_the_pass_no_longer_wants_is_read_then_pruned() {
        let server = ScriptedApiServer::new();
        let ctx = context(&server);
        let db = owner();
        let maps: Api<ConfigMap> = Api::namespaced(server.client(), "shop");
        let (created, _) = Applier::new(&ctx, &db)
            .apply(&maps, &map("orders-config", Some("a1b2c3")), None)
            .await
            .expect("created");
        watched(&ctx, &created);
        let verified = ctx
            .ledger
            .current::<ConfigMap>("shop", "orders-config")
            .expect("vouched for");
        let applier = Applier::new(&ctx, &db);
        applier
            .prune_seen(
                &maps,
                &Seen::Unread {
                    name: "orders-config".into(),
                    verified,
                },
            )
            .await
            .expect("pruned");
        assert!(server.object(&format!("{MAPS}/orders-config")).is_none());
    }

    #[tokio::test]
    async fn a_write_starts_from_the_object_read_again_not_from_the_cached_copy() {
        let server = ScriptedApiServer::new();
        let ctx = context(&server);
        let db = owner();
        let maps: Api<ConfigMap> = Api::namespaced(server.client(), "shop");
        let desired = map("orders-topology", Some("a1b2c3"));
        let (cached, _) = Applier::new(&ctx, &db)
            .apply(&maps, &desired, None)
            .await
            .expect("created");
        let requests_before = server.requests().len();

        let applier = Applier::new(&ctx, &db);
        let same = applier
            .apply_seen(&maps, &desired, &Seen::Read(cached.clone()))
            .await
            .expect("same");
        assert_eq!(same, Applied::Unchanged);
        assert_eq!(server.requests().len(), requests_before, "found unchanged");

        let mut changed = desired.clone();
        changed.data = Some([("primary".to_owned(), "orders-1".to_owned())].into());
        applier
            .apply_seen(&maps, &changed, &Seen::Read(cached))
            .await
            .expect("applied");
        let methods: Vec<String> = server.requests()[requests_before..]
            .iter()
            .map(|r| r.method.to_string())
            .collect();
        assert_eq!(methods, ["GET", "PATCH"], "read again, then written");
        assert!(
            server.requests()[requests_before].query.is_empty(),
            "the read before a write is not from the cache"
        );
    }
}
