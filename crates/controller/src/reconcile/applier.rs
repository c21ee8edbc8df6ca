//! The one way a pass writes a Database's owned objects. Each desired object goes
//! through [`Applier::apply`] (skipped when its hash matches what exists, counted once
//! here when written); once they all have, [`Applier::prune`] deletes every observed
//! object this Database controls that the pass did not want: a budget a single instance
//! no longer needs, a configuration file whose settings were removed, the scripts of a
//! layout that has none. An object the Database does not control is never deleted, and
//! never written: the preflight stops the pass before the first write when one is in the
//! way, and a create that races with someone else's refuses to apply over it.

use std::collections::HashSet;
use std::fmt::Debug;
use std::sync::Mutex;

use database_api::Database;
use kube::api::{Api, DeleteParams, Preconditions};
use kube::{Resource, ResourceExt as _};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::conflicts::is_controlled_by;
use crate::context::Context;
use crate::error::Error;
use crate::objects::{Applied, apply, delete_if_present, delete_with};

/// Applies one Database's owned objects in one pass and prunes what it no longer wants.
pub(crate) struct Applier<'a> {
    ctx: &'a Context,
    owner: &'a Database,
    /// Kind and name of every object this pass applied or otherwise keeps.
    wanted: Mutex<HashSet<(String, String)>>,
}

impl<'a> Applier<'a> {
    pub(crate) fn new(ctx: &'a Context, owner: &'a Database) -> Self {
        Self {
            ctx,
            owner,
            wanted: Mutex::default(),
        }
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
        let (object, applied) = apply(api, desired, observed).await?;
        if applied != Applied::Unchanged {
            self.ctx.metrics.wrote("apply");
        }
        Ok((object, applied))
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
}
