//! `cargo xtask images build|list`: the container images of the real tier, built from
//! Debian packages (see `testenv::images` for the recipes) and cached per user; an image
//! is rebuilt only when its recipe changes.

mod downloads;
mod oci;
mod operator;
mod rootfs;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, bail};
use clap::Subcommand;
use serde_json::json;
use testenv::images::{self, OPERATOR_ID, PAUSE_ID, PAUSE_IMAGE, Recipe, VersionFrom};

#[derive(Subcommand)]
pub enum ImagesCommand {
    /// Build the images that are missing or whose recipe changed (all, or those named).
    Build {
        /// Recipe ids (`postgres-17`, `mysql-9`, ...); all when none.
        ids: Vec<String>,
    },
    /// List the recipes and the images built from them.
    List,
}

pub fn run(command: ImagesCommand) -> anyhow::Result<()> {
    match command {
        ImagesCommand::Build { ids } => ensure_built(&ids),
        ImagesCommand::List => {
            list();
            Ok(())
        }
    }
}

fn list() {
    for id in [PAUSE_ID, OPERATOR_ID]
        .into_iter()
        .chain(images::all().map(|r| r.id))
    {
        let references = images::references(id);
        if references.is_empty() {
            println!("{id:<14} not built");
        } else {
            println!("{id:<14} {}", references.join(" "));
        }
    }
}

/// Builds every image in `ids` (all when empty) that is missing or stale.
pub fn ensure_built(ids: &[String]) -> anyhow::Result<()> {
    for id in ids {
        if id != PAUSE_ID && id != OPERATOR_ID && images::recipe(id).is_none() {
            bail!("no image recipe {id}; `cargo xtask images list` shows them");
        }
    }
    let wanted = |id: &str| ids.is_empty() || ids.iter().any(|i| i == id);
    let started = Instant::now();
    if wanted(PAUSE_ID) {
        fresh_or_build(PAUSE_ID, &pause_fingerprint(), build_pause)?;
    }
    if wanted(OPERATOR_ID) {
        operator::build_binary()?;
        fresh_or_build(OPERATOR_ID, &operator::fingerprint(), operator::build)?;
    }
    for recipe in images::all().filter(|r| wanted(r.id)) {
        fresh_or_build(recipe.id, &fingerprint(recipe), |dir| {
            build_recipe(recipe, dir)
        })?;
    }
    println!("images: ready in {:.0?}", started.elapsed());
    Ok(())
}

/// Builds `id` into a fresh folder unless the cached one has this `fingerprint`.
fn fresh_or_build(
    id: &str,
    fingerprint: &str,
    build: impl FnOnce(&Path) -> anyhow::Result<Vec<String>>,
) -> anyhow::Result<()> {
    let dir = images::cache_dir().join(id);
    let recorded = std::fs::read_to_string(dir.join("fingerprint")).unwrap_or_default();
    if recorded == fingerprint && images::archive(id).is_file() {
        return Ok(());
    }
    println!(
        "images: building {id} (about a minute, once; cached in {})",
        dir.display()
    );
    let started = Instant::now();
    let work = images::cache_dir().join(format!("{id}.building"));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work)?;
    let references = build(&work).with_context(|| format!("building image {id}"))?;
    std::fs::write(work.join("refs"), references.join("\n") + "\n")?;
    std::fs::write(work.join("fingerprint"), fingerprint)?;
    let _ = std::fs::remove_dir_all(work.join("layout"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::rename(&work, &dir)?;
    println!(
        "images: {id} built in {:.0?}: {}",
        started.elapsed(),
        references.join(" ")
    );
    Ok(())
}

/// The image's version, its tags, and where the version came from.
fn version_and_tags(
    recipe: &Recipe,
    rootfs: &Path,
) -> anyhow::Result<(String, Vec<String>, String)> {
    let from_debian =
        |package: &str, version: &str| format!("{package} {version} from Debian {}", recipe.suite);
    Ok(match recipe.version {
        VersionFrom::Package(package) => {
            let version = rootfs::installed_version(rootfs, package)?;
            let upstream = rootfs::upstream_version(&version);
            let tags = rootfs::tags(&upstream);
            (upstream, tags, from_debian(package, &version))
        }
        VersionFrom::Release(package) => {
            let version = rootfs::installed_version(rootfs, package)?;
            let release = format!("v{}", rootfs::upstream_version(&version));
            (
                release.clone(),
                vec![release],
                from_debian(package, &version),
            )
        }
        VersionFrom::Fixed(version) => (
            version.to_owned(),
            rootfs::tags(version),
            format!("{version} on Debian {}", recipe.suite),
        ),
    })
}

fn build_recipe(recipe: &Recipe, work: &Path) -> anyhow::Result<Vec<String>> {
    let files_dir = work.join("files");
    std::fs::create_dir_all(&files_dir)?;
    let mut files = Vec::new();
    for (index, (_, contents, _)) in recipe.files.iter().enumerate() {
        let file = files_dir.join(format!("file-{index}"));
        std::fs::write(&file, contents)?;
        files.push(file);
    }
    let downloaded = downloads::fetch(recipe.downloads, &work.join("downloads"))?;
    let layout = work.join("layout");
    std::fs::create_dir_all(&layout)?;
    let rootfs = layout.join("rootfs.tar");
    let paths: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
    rootfs::build(
        recipe,
        &paths,
        &downloaded,
        &rootfs,
        &work.join("mmdebstrap.log"),
    )?;
    let _ = std::fs::remove_dir_all(work.join("downloads"));
    let (upstream, tags, source) = version_and_tags(recipe, &rootfs)?;
    let references: Vec<String> = tags
        .into_iter()
        .map(|tag| format!("{}:{tag}", recipe.repository))
        .collect();
    let labels = json!({
        "org.opencontainers.image.version": upstream,
        "org.opencontainers.image.description": format!("{source}, with this project's entrypoint"),
    });
    write_archive(
        &layout,
        &rootfs,
        &references,
        &work.join("image.tar"),
        |diff_id| oci::config(recipe, diff_id, &labels),
    )?;
    Ok(references)
}

/// The pause image: one static binary, run as nobody.
fn build_pause(work: &Path) -> anyhow::Result<Vec<String>> {
    let root = work.join("root");
    std::fs::create_dir_all(&root)?;
    let status = Command::new("gcc")
        .args(["-static", "-O2", "-s", "-o"])
        .arg(root.join("pause"))
        .arg(pause_source())
        .status()
        .context("running gcc (apt-get install gcc libc6-dev)")?;
    if !status.success() {
        bail!("gcc failed with {status}");
    }
    let layout = work.join("layout");
    std::fs::create_dir_all(&layout)?;
    let layer = layout.join("layer.tar");
    let status = Command::new("tar")
        .args(["--owner=0", "--group=0", "-cf"])
        .arg(&layer)
        .arg("-C")
        .arg(&root)
        .arg("pause")
        .status()?;
    if !status.success() {
        bail!("tar failed with {status}");
    }
    let references = vec![PAUSE_IMAGE.to_owned()];
    write_archive(
        &layout,
        &layer,
        &references,
        &work.join("image.tar"),
        |diff_id| {
            json!({
                "architecture": "amd64",
                "os": "linux",
                "config": {"Entrypoint": ["/pause"], "User": "65535:65535"},
                "rootfs": {"type": "layers", "diff_ids": [diff_id]},
            })
        },
    )?;
    Ok(references)
}

/// Adds `layer` and its config to the layout and packs it into `archive`.
fn write_archive(
    layout: &Path,
    layer: &Path,
    references: &[String],
    archive: &Path,
    config: impl FnOnce(&str) -> serde_json::Value,
) -> anyhow::Result<()> {
    let layer = oci::add_blob(layout, layer)?;
    let config = oci::add_json_blob(layout, &config(&layer.digest))?;
    let manifest = oci::add_json_blob(layout, &oci::manifest(&config, &layer))?;
    oci::pack(layout, &oci::index(&manifest, references), archive)
}

fn pause_source() -> PathBuf {
    crate::workspace_root().join("crates/testenv/images/pause/pause.c")
}

fn pause_fingerprint() -> String {
    format!(
        "{:016x}",
        fnv1a(&std::fs::read(pause_source()).unwrap_or_default())
    )
}

/// A stable hash of everything a recipe says, so a changed recipe is rebuilt.
fn fingerprint(recipe: &Recipe) -> String {
    format!("{:016x}", fnv1a(format!("{recipe:?}").as_bytes()))
}

/// FNV-1a: stable across Rust releases, unlike the standard library's hasher.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_recipe_has_another_fingerprint() {
        let recipe = images::recipe("postgres-17").expect("recipe");
        let changed = Recipe {
            packages: &["postgresql-17"],
            ..*images::recipe("postgres-17").expect("recipe")
        };
        assert_ne!(fingerprint(recipe), fingerprint(&changed));
        assert_eq!(fingerprint(recipe), fingerprint(recipe));
    }
}
