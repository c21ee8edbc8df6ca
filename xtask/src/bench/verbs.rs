//! What a new owned object costs by verb: a plain create against a server-side apply
//! of the same StatefulSet body (the controller's own), interleaved pair by pair so both
//! see the same load. The controller creates missing objects with the cheaper one.

use std::time::{Duration, Instant};

use database_api::constants::FIELD_MANAGER;
use k8s_openapi::api::apps::v1::StatefulSet;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use super::cluster::NAMESPACE;
use super::stats::Summary;

/// Enough pairs for a p50 that holds still, few enough to leave the burst unaffected.
const PAIRS: usize = 40;

pub struct Verbs {
    pub create: Summary,
    pub apply: Summary,
}

impl Verbs {
    pub fn to_json(&self) -> Value {
        json!({"plain_create": self.create.to_json(), "server_side_apply": self.apply.to_json()})
    }
}

/// Writes `PAIRS` copies of the StatefulSet `template` each way, then deletes them.
pub async fn measure(client: &Client, template: &str) -> anyhow::Result<Verbs> {
    let api: Api<StatefulSet> = Api::namespaced(client.clone(), NAMESPACE);
    let template = api.get(template).await?;
    let (mut creates, mut applies) = (Vec::new(), Vec::new());
    for pair in 0..PAIRS {
        let by_post = copy_of(&template, &format!("verbs-create-{pair}"));
        let by_apply = copy_of(&template, &format!("verbs-apply-{pair}"));
        // Alternate which goes first, so neither always meets a warmer server.
        if pair % 2 == 0 {
            creates.push(create(&api, &by_post).await?);
            applies.push(apply(&api, &by_apply).await?);
        } else {
            applies.push(apply(&api, &by_apply).await?);
            creates.push(create(&api, &by_post).await?);
        }
    }
    for pair in 0..PAIRS {
        for name in [
            format!("verbs-create-{pair}"),
            format!("verbs-apply-{pair}"),
        ] {
            api.delete(&name, &DeleteParams::default()).await?;
        }
    }
    Ok(Verbs {
        create: Summary::of(&creates),
        apply: Summary::of(&applies),
    })
}

/// The template under a new name, with no owner (so the controller leaves it alone) and
/// no replicas (so no Pods follow).
fn copy_of(template: &StatefulSet, name: &str) -> StatefulSet {
    let mut copy = StatefulSet {
        metadata: kube::api::ObjectMeta {
            name: Some(name.to_owned()),
            namespace: template.namespace(),
            annotations: template.metadata.annotations.clone(),
            ..Default::default()
        },
        spec: template.spec.clone(),
        status: None,
    };
    if let Some(spec) = copy.spec.as_mut() {
        spec.replicas = Some(0);
    }
    copy
}

async fn create(api: &Api<StatefulSet>, object: &StatefulSet) -> anyhow::Result<Duration> {
    let params = PostParams {
        dry_run: false,
        field_manager: Some(FIELD_MANAGER.to_owned()),
    };
    let started = Instant::now();
    api.create(&params, object).await?;
    Ok(started.elapsed())
}

async fn apply(api: &Api<StatefulSet>, object: &StatefulSet) -> anyhow::Result<Duration> {
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let started = Instant::now();
    api.patch(&object.name_any(), &params, &Patch::Apply(object))
        .await?;
    Ok(started.elapsed())
}
