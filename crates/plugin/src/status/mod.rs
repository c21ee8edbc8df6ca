//! `status NAME`: a Database on one screen. This module reads what the screen needs
//! (the Database and the events regarding it); [`render`] turns it into text.

mod age;
pub mod events;
pub mod render;
mod table;

use jiff::Timestamp;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams};

use crate::cluster::Target;
use crate::database;
use crate::error::Error;

/// The status screen of Database `name`.
pub async fn run(target: &Target, name: &str) -> Result<String, Error> {
    let db = database::get(target, name).await?;
    let api: Api<Event> = Api::namespaced(target.client.clone(), &target.namespace);
    let listed = api
        .list(&ListParams::default().fields(&events::field_selector(name)))
        .await
        .map_err(|source| Error::ListEvents {
            name: name.to_owned(),
            source,
        })?;
    let recent = events::recent(listed.items, &db);
    Ok(render::render(&db, &recent, Timestamp::now()))
}
