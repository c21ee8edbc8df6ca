//! Installing a CustomResourceDefinition and waiting until it is served.

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Client, ResourceExt};

use crate::error::Error;

/// Applies `crd` (server-side, field manager `testenv`) and waits until it is Established.
pub async fn install_crd(client: &Client, crd: &CustomResourceDefinition) -> Result<(), Error> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let name = crd.name_any();
    api.patch(
        &name,
        &PatchParams::apply("testenv").force(),
        &Patch::Apply(crd),
    )
    .await?;
    let established = await_condition(api, &name, conditions::is_crd_established());
    match tokio::time::timeout(Duration::from_secs(30), established).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(err)) => Err(Error::NotReady {
            what: format!("CRD {name}"),
            timeout: Duration::from_secs(30),
            log: err.to_string(),
        }),
        Err(_) => Err(Error::NotReady {
            what: format!("CRD {name}"),
            timeout: Duration::from_secs(30),
            log: String::new(),
        }),
    }
}
