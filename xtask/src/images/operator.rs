//! The operator's image as the real tier runs it: the backup agent its backup and
//! restore Jobs start, on the C runtime it links against (glibc and libgcc from this
//! Debian machine, as in the published image's distroless base), the system's trusted
//! roots and the `nonroot` user, under the name the deploy manifests give the image.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};
use serde_json::json;
use testenv::images::OPERATOR_IMAGE;

/// The binary that goes in, built by `cargo build -p database-backup`.
pub fn binary() -> PathBuf {
    crate::workspace_root().join("target/debug/backup-agent")
}

/// Builds the agent, so the image always carries the current one.
pub fn build_binary() -> anyhow::Result<()> {
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args([
            "build",
            "--quiet",
            "--locked",
            "-p",
            "database-backup",
            "--bin",
            "backup-agent",
        ])
        .current_dir(crate::workspace_root())
        .status()
        .context("running cargo build for the backup agent")?;
    if !status.success() {
        bail!("building the backup agent failed with {status}");
    }
    Ok(())
}

/// The image's fingerprint: the agent's bytes.
pub fn fingerprint() -> String {
    format!(
        "{:016x}",
        super::fnv1a(&std::fs::read(binary()).unwrap_or_default())
    )
}

/// Assembles the root filesystem and packs it; returns the image's references.
pub fn build(work: &Path) -> anyhow::Result<Vec<String>> {
    let root = work.join("root");
    std::fs::create_dir_all(root.join("etc/ssl/certs"))?;
    std::fs::create_dir_all(root.join("tmp"))?;
    std::fs::copy(binary(), root.join("backup-agent"))
        .with_context(|| format!("copying {}", binary().display()))?;
    for library in shared_libraries(&binary())? {
        let inside = root.join(library.strip_prefix("/").unwrap_or(&library));
        if let Some(dir) = inside.parent() {
            std::fs::create_dir_all(dir)?;
        }
        // The file itself, not the symlink the loader path may be.
        std::fs::copy(&library, &inside)
            .with_context(|| format!("copying {}", library.display()))?;
    }
    std::fs::copy(
        "/etc/ssl/certs/ca-certificates.crt",
        root.join("etc/ssl/certs/ca-certificates.crt"),
    )
    .context("copying the trusted roots (apt-get install ca-certificates)")?;
    std::fs::write(
        root.join("etc/passwd"),
        "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n",
    )?;
    std::fs::write(root.join("etc/group"), "root:x:0:\nnonroot:x:65532:\n")?;
    let layout = work.join("layout");
    std::fs::create_dir_all(&layout)?;
    let layer = layout.join("layer.tar");
    let status = Command::new("tar")
        .args(["--owner=0", "--group=0", "--mode=u+rwX,go+rX", "-cf"])
        .arg(&layer)
        .arg("-C")
        .arg(&root)
        .arg(".")
        .status()?;
    if !status.success() {
        bail!("tar failed with {status}");
    }
    let references = vec![OPERATOR_IMAGE.to_owned()];
    super::write_archive(
        &layout,
        &layer,
        &references,
        &work.join("image.tar"),
        |diff_id| {
            json!({
                "architecture": "amd64",
                "os": "linux",
                "config": {
                    "Entrypoint": ["/backup-agent"],
                    "User": "65532:65532",
                    "Labels": {"org.opencontainers.image.description": "the operator's backup agent on this machine's C runtime, for the real tier"},
                },
                "rootfs": {"type": "layers", "diff_ids": [diff_id]},
            })
        },
    )?;
    std::fs::remove_dir_all(&root)?;
    Ok(references)
}

/// The shared libraries `binary` loads (and the loader), as `ldd` resolves them.
fn shared_libraries(binary: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let output = Command::new("ldd")
        .arg(binary)
        .output()
        .context("running ldd")?;
    if !output.status.success() {
        bail!("ldd {} failed", binary.display());
    }
    Ok(parse_ldd(&String::from_utf8_lossy(&output.stdout)))
}

fn parse_ldd(text: &str) -> Vec<PathBuf> {
    text.lines()
        .filter_map(|line| {
            let line = line.trim();
            let path = match line.split_once("=>") {
                Some((_, resolved)) => resolved.split_whitespace().next()?,
                None => line.split_whitespace().next()?,
            };
            path.starts_with('/').then(|| PathBuf::from(path))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_image_is_named_as_the_deploy_manifests_name_it() {
        let kustomization = std::fs::read_to_string(
            crate::workspace_root().join("deploy/default/kustomization.yaml"),
        )
        .expect("deploy/default/kustomization.yaml");
        let (name, tag) = OPERATOR_IMAGE.rsplit_once(':').expect("a tag");
        assert!(
            kustomization.contains(&format!("newName: {name}")),
            "{kustomization}"
        );
        assert!(
            kustomization.contains(&format!("newTag: {tag}")),
            "{kustomization}"
        );
    }

    #[test]
    fn ldd_lines_give_the_libraries_and_the_loader() {
        let text = "\tlinux-vdso.so.1 (0x00007ffd)\n\tlibgcc_s.so.1 => /lib/x86_64-linux-gnu/libgcc_s.so.1 (0x00007f)\n\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f)\n\t/lib64/ld-linux-x86-64.so.2 (0x00007f)\n";
        assert_eq!(
            parse_ldd(text),
            [
                PathBuf::from("/lib/x86_64-linux-gnu/libgcc_s.so.1"),
                PathBuf::from("/lib/x86_64-linux-gnu/libc.so.6"),
                PathBuf::from("/lib64/ld-linux-x86-64.so.2"),
            ]
        );
    }
}
