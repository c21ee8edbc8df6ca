//! A new Database's first pass, which reads nothing: almost always none of its objects
//! exists yet, so each is created, and a create that finds its name taken is the read.
//!
//! The order keeps the data safe without the reads. What the instances read goes first:
//! the credentials Secret and the ConfigMaps they mount. A name someone else holds, or
//! credentials kept from an earlier Database of this name (whose claims may still hold
//! its data), stop the pass before the StatefulSet, which would start instances on
//! them. The StatefulSet follows (then the finalizer), with the Services, the connection
//! Secret and the budget beside it: nothing an instance reads, and a name of theirs
//! found taken is reported as any conflict is, by the pass that reads. Any error ends
//! the unread pass, and the pass starts over reading what is there, as every later
//! pass does (see [`super::apply_owned`]).

use k8s_openapi::api::apps::v1::StatefulSet;

use super::add_finalizer;
use super::applier::Applier;
use super::notify::announce;
use super::owned::{
    OwnedPass, apply_config, apply_connection, apply_mounted_configmaps, apply_services_and_budget,
    claim_credentials,
};
use crate::error::Error;

impl OwnedPass<'_> {
    /// Writes a new Database's objects in the order above; returns its StatefulSet.
    pub(super) async fn write_unread(
        &self,
        applier: &Applier<'_>,
        template_storage: &str,
    ) -> Result<StatefulSet, Error> {
        let (ctx, db, apis, observed, shape) =
            (self.ctx, self.db, self.apis, self.observed, self.shape);
        let (credentials, (), ()) = tokio::try_join!(
            claim_credentials(applier, apis, db, observed),
            apply_mounted_configmaps(applier, apis, db, observed, shape.layout, &shape.named),
            apply_config(applier, &apis.configmaps, &shape.as_run, &observed.config),
        )?;
        let desired_set = self.desired_statefulset(template_storage);
        let connection = async {
            match &credentials {
                Some(credentials) => {
                    apply_connection(applier, apis, db, observed, credentials).await
                }
                None => Ok(()),
            }
        };
        let rest = async {
            tokio::try_join!(
                apply_services_and_budget(applier, apis, db, observed, &shape.named),
                connection
            )
            .map(|_| ())
        };
        // The finalizer once the Database has a StatefulSet: only then is there data for
        // its deletion to look after.
        let set_then_finalizer = async {
            let set = applier.apply(&apis.sets, &desired_set, None).await?;
            add_finalizer(ctx, self.databases, db, true).await?;
            Ok(set)
        };
        let ((set, set_applied), ()) = tokio::try_join!(set_then_finalizer, rest)?;
        announce(ctx, db, None, set_applied).await;
        Ok(set)
    }
}
