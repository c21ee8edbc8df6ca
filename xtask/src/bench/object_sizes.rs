//! How large the objects a controller writes are, as the API server serves them: every
//! write of an object makes the API server decode, validate, convert and encode all of
//! it, managed fields included, so its size sets what each write costs. One object of
//! each kind stays in `target/bench/object-<kind>.json`.

use k8s_openapi::api::{apps::v1::StatefulSet, core::v1};
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube::{Client, ResourceExt as _};

use super::cluster::NAMESPACE;

/// The average size of one kind's objects in a sample.
pub struct KindSize {
    pub kind: &'static str,
    pub sampled: usize,
    /// The whole object as JSON.
    pub bytes: f64,
    /// Its `metadata.managedFields` as JSON.
    pub managed_fields_bytes: f64,
}

/// How many objects of each kind are measured.
const SAMPLE: u32 = 100;

/// The Databases and the objects of each kind that a Database owns in the benchmark's
/// namespace, up to [`SAMPLE`] of each; kinds with none are left out.
pub async fn measure(client: &Client) -> anyhow::Result<Vec<KindSize>> {
    let kinds = [
        ("Database", erase::<database_api::Database>(), false),
        ("StatefulSet", erase::<StatefulSet>(), true),
        ("Service", erase::<v1::Service>(), true),
        ("Secret", erase::<v1::Secret>(), true),
        ("ConfigMap", erase::<v1::ConfigMap>(), true),
    ];
    let mut sizes = Vec::new();
    for (kind, resource, owned_only) in kinds {
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), NAMESPACE, &resource);
        let listed = api.list(&ListParams::default().limit(SAMPLE)).await?;
        let sample: Vec<&DynamicObject> = listed
            .items
            .iter()
            .filter(|object| !owned_only || owned_by_database(object))
            .collect();
        if let Some(first) = sample.first() {
            keep(kind, first)?;
        }
        if let Some(size) = average(kind, &sample)? {
            sizes.push(size);
        }
    }
    Ok(sizes)
}

/// Keeps one object of the kind in `target/bench/object-<kind>.json`, to read what
/// makes it as large as it is.
fn keep(kind: &str, object: &DynamicObject) -> anyhow::Result<()> {
    let dir = super::output_dir();
    std::fs::create_dir_all(&dir)?;
    let path = dir.join(format!("object-{}.json", kind.to_lowercase()));
    std::fs::write(path, serde_json::to_vec_pretty(object)?)?;
    Ok(())
}

fn erase<K: kube::Resource<DynamicType = ()>>() -> ApiResource {
    ApiResource::erase::<K>(&())
}

fn owned_by_database(object: &DynamicObject) -> bool {
    object
        .owner_references()
        .iter()
        .any(|owner| owner.kind == "Database")
}

fn average(kind: &'static str, sample: &[&DynamicObject]) -> anyhow::Result<Option<KindSize>> {
    if sample.is_empty() {
        return Ok(None);
    }
    let (mut bytes, mut managed) = (0usize, 0usize);
    for object in sample {
        bytes += serde_json::to_vec(object)?.len();
        managed += serde_json::to_vec(&object.metadata.managed_fields)?.len();
    }
    #[allow(clippy::cast_precision_loss)]
    let per = |total: usize| total as f64 / sample.len() as f64;
    Ok(Some(KindSize {
        kind,
        sampled: sample.len(),
        bytes: per(bytes),
        managed_fields_bytes: per(managed),
    }))
}

/// The sizes as a table.
pub fn print(databases: usize, sizes: &[KindSize]) {
    println!(
        "\n| object at {databases} (as the API server serves it) | sampled | JSON bytes | of them managed fields |"
    );
    println!("| --- | --- | --- | --- |");
    for size in sizes {
        println!(
            "| {} | {} | {:.0} | {:.0} |",
            size.kind, size.sampled, size.bytes, size.managed_fields_bytes
        );
    }
}
