//! An OCI image layout archive of one uncompressed layer, which `ctr images import`
//! reads: `oci-layout`, `index.json` (one entry per name, annotated
//! `io.containerd.image.name`) and the blobs.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, bail};
use serde_json::{Value, json};
use testenv::images::Recipe;

const MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
const CONFIG: &str = "application/vnd.oci.image.config.v1+json";
const LAYER: &str = "application/vnd.oci.image.layer.v1.tar";

/// A blob in the layout: its digest (`sha256:...`) and size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Blob {
    pub digest: String,
    pub size: u64,
}

/// The image configuration for `recipe` over one layer whose uncompressed digest is
/// `diff_id`.
pub fn config(recipe: &Recipe, diff_id: &str, labels: &Value) -> Value {
    let env: Vec<String> = recipe.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let ports: serde_json::Map<String, Value> = recipe
        .ports
        .iter()
        .map(|p| ((*p).to_owned(), json!({})))
        .collect();
    let volumes: serde_json::Map<String, Value> = recipe
        .volumes
        .iter()
        .map(|v| ((*v).to_owned(), json!({})))
        .collect();
    json!({
        "architecture": "amd64",
        "os": "linux",
        "config": {
            "Env": env,
            "Entrypoint": recipe.entrypoint,
            "Cmd": recipe.cmd,
            "ExposedPorts": ports,
            "Volumes": volumes,
            "StopSignal": recipe.stop_signal,
            "Labels": labels,
        },
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{"created_by": format!("cargo xtask images build {}", recipe.id)}],
    })
}

/// The manifest of a one-layer image.
pub fn manifest(config: &Blob, layer: &Blob) -> Value {
    json!({
        "schemaVersion": 2,
        "mediaType": MANIFEST,
        "config": {"mediaType": CONFIG, "digest": config.digest, "size": config.size},
        "layers": [{"mediaType": LAYER, "digest": layer.digest, "size": layer.size}],
    })
}

/// The index naming `manifest` once per reference.
pub fn index(manifest: &Blob, references: &[String]) -> Value {
    let manifests: Vec<Value> = references
        .iter()
        .map(|reference| {
            let tag = reference.rsplit(':').next().unwrap_or_default();
            json!({
                "mediaType": MANIFEST,
                "digest": manifest.digest,
                "size": manifest.size,
                "annotations": {
                    "io.containerd.image.name": reference,
                    "org.opencontainers.image.ref.name": tag,
                },
                "platform": {"architecture": "amd64", "os": "linux"},
            })
        })
        .collect();
    json!({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": manifests})
}

/// Moves `file` into `<layout>/blobs/sha256/<digest>` and returns its digest and size.
pub fn add_blob(layout: &Path, file: &Path) -> anyhow::Result<Blob> {
    let digest = sha256(file)?;
    let size = std::fs::metadata(file)?.len();
    let dir = layout.join("blobs/sha256");
    std::fs::create_dir_all(&dir)?;
    std::fs::rename(file, dir.join(&digest))?;
    Ok(Blob {
        digest: format!("sha256:{digest}"),
        size,
    })
}

/// Writes `value` as a blob.
pub fn add_json_blob(layout: &Path, value: &Value) -> anyhow::Result<Blob> {
    let file = layout.join("blob.json");
    std::fs::write(&file, serde_json::to_vec(value)?)?;
    add_blob(layout, &file)
}

/// Writes `oci-layout` and `index.json` and packs the layout into `archive`.
pub fn pack(layout: &Path, index: &Value, archive: &Path) -> anyhow::Result<()> {
    std::fs::write(
        layout.join("oci-layout"),
        r#"{"imageLayoutVersion":"1.0.0"}"#,
    )?;
    std::fs::write(layout.join("index.json"), serde_json::to_vec(index)?)?;
    let status = Command::new("tar")
        .arg("-cf")
        .arg(archive)
        .arg("-C")
        .arg(layout)
        .args(["oci-layout", "index.json", "blobs"])
        .status()
        .context("running tar")?;
    if !status.success() {
        bail!("tar failed with {status}");
    }
    Ok(())
}

fn sha256(file: &Path) -> anyhow::Result<String> {
    let output = Command::new("sha256sum")
        .arg(file)
        .output()
        .context("running sha256sum")?;
    if !output.status.success() {
        bail!("sha256sum {} failed", file.display());
    }
    String::from_utf8_lossy(&output.stdout)
        .split_whitespace()
        .next()
        .map(str::to_owned)
        .context("sha256sum printed nothing")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_index_names_the_manifest_once_per_reference() {
        let manifest = Blob {
            digest: "sha256:abc".into(),
            size: 10,
        };
        let index = index(
            &manifest,
            &[
                "docker.io/library/postgres:17".to_owned(),
                "docker.io/library/postgres:17.12".to_owned(),
            ],
        );
        let entries = index["manifests"].as_array().expect("manifests");
        assert_eq!(entries.len(), 2);
        assert_eq!(
            entries[1]["annotations"]["io.containerd.image.name"],
            "docker.io/library/postgres:17.12"
        );
        assert_eq!(
            entries[1]["annotations"]["org.opencontainers.image.ref.name"],
            "17.12"
        );
        assert!(entries.iter().all(|e| e["digest"] == "sha256:abc"));
    }

    #[test]
    fn the_config_carries_the_recipe_contract() {
        let recipe = testenv::images::recipe("postgres-17").expect("recipe");
        let config = config(recipe, "sha256:layer", &json!({}));
        assert_eq!(
            config["config"]["Entrypoint"],
            json!(["docker-entrypoint.sh"])
        );
        assert_eq!(config["config"]["Cmd"], json!(["postgres"]));
        assert_eq!(config["config"]["StopSignal"], "SIGINT");
        assert!(config["config"]["ExposedPorts"].get("5432/tcp").is_some());
        assert_eq!(config["rootfs"]["diff_ids"], json!(["sha256:layer"]));
        let env = config["config"]["Env"].as_array().expect("env");
        assert!(env.contains(&json!("PGDATA=/var/lib/postgresql/data")));
    }
}
