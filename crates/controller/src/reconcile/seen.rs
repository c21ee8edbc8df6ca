//! What a pass knows of one owned object: read from the API server, known to be
//! missing, or known from the [`Ledger`] to be as an earlier pass verified it, and so
//! not read at all.

use std::fmt::Debug;

use kube::api::Api;
use kube::{Resource, ResourceExt as _};
use serde::de::DeserializeOwned;

use crate::error::Error;
use crate::objects::ledger::{Ledger, Verified};
use crate::objects::{get_cached_opt, get_opt};

#[derive(Debug, Clone, Default)]
pub(crate) enum Seen<K> {
    #[default]
    Missing,
    Read(K),
    /// Unchanged since a pass found it as it wanted it (its desired hash then is in
    /// `verified`); the object is this Database's, as only its own are verified.
    Unread {
        name: String,
        verified: Verified,
    },
}

impl<K> Seen<K> {
    /// The object, when the pass read it.
    pub(crate) fn read(&self) -> Option<&K> {
        match self {
            Seen::Read(object) => Some(object),
            Seen::Missing | Seen::Unread { .. } => None,
        }
    }
}

/// The object of kind `K` named `name`: unread when the ledger knows it unchanged
/// since it was verified, else read from the API server's cache (see
/// [`get_cached_opt`]: a pass only compares it with what it wants, and a change the
/// cache has not yet shown brings a pass of its own).
pub(crate) async fn sight<K>(
    ledger: &Ledger,
    api: &Api<K>,
    namespace: &str,
    name: &str,
) -> Result<Seen<K>, Error>
where
    K: Resource<DynamicType = ()> + DeserializeOwned + Clone + Debug,
{
    if let Some(verified) = ledger.current::<K>(namespace, name) {
        return Ok(Seen::Unread {
            name: name.to_owned(),
            verified,
        });
    }
    Ok(get_cached_opt(api, name)
        .await?
        .map_or(Seen::Missing, Seen::Read))
}

/// The object as the API server has it now, for a write: read again (from etcd) unless
/// it was seen missing, in which case a create finds out.
pub(crate) async fn fresh<K>(api: &Api<K>, seen: &Seen<K>) -> Result<Option<K>, Error>
where
    K: Resource<DynamicType = ()> + DeserializeOwned + Clone + Debug,
{
    match seen {
        Seen::Missing => Ok(None),
        Seen::Read(object) => get_opt(api, &object.name_any()).await,
        Seen::Unread { name, .. } => get_opt(api, name).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use serde_json::json;
    use testenv::scripted::ScriptedApiServer;

    #[tokio::test]
    async fn an_object_the_ledger_cannot_vouch_for_is_read_from_the_cache() {
        let server = ScriptedApiServer::new();
        server.holds(
            "/api/v1/namespaces/shop/configmaps/orders-topology",
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "orders-topology", "namespace": "shop"}}),
        );
        let maps: Api<ConfigMap> = Api::namespaced(server.client(), "shop");
        let ledger = Ledger::default();
        let seen = sight(&ledger, &maps, "shop", "orders-topology")
            .await
            .expect("read");
        assert!(seen.read().is_some());
        let missing = sight(&ledger, &maps, "shop", "orders-config")
            .await
            .expect("read");
        assert!(matches!(missing, Seen::Missing));
        let requests = server.requests();
        assert_eq!(requests.len(), 2);
        for request in requests {
            assert!(request.query.contains("resourceVersion=0"), "{request:?}");
        }
    }
}
