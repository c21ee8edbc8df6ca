//! `cargo xtask manifests [--check]`: the generated files under `deploy/`.

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::{Context, bail};

/// One generated file: where it goes and what it must contain.
struct Generated {
    path: PathBuf,
    contents: String,
}

fn generated() -> anyhow::Result<Vec<Generated>> {
    let root = crate::workspace_root().join("deploy/crd");
    let mut files = Vec::new();
    let mut resources = String::new();
    for crd in crdgen::crds() {
        let name = crdgen::file_name(&crd);
        writeln!(resources, "- {name}")?;
        files.push(Generated {
            path: root.join(name),
            contents: crdgen::render(&crd)?,
        });
    }
    files.push(Generated {
        path: root.join("kustomization.yaml"),
        contents: format!(
            "{}apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n{resources}",
            crdgen::HEADER
        ),
    });
    Ok(files)
}

pub fn run(check: bool) -> anyhow::Result<()> {
    let mut stale = Vec::new();
    for file in generated()? {
        let current = std::fs::read_to_string(&file.path).unwrap_or_default();
        if current == file.contents {
            continue;
        }
        if check {
            println!(
                "--- {} (committed)\n+++ {} (generated)",
                file.path.display(),
                file.path.display()
            );
            print!("{}", diff(&current, &file.contents));
            stale.push(file.path.display().to_string());
        } else {
            if let Some(dir) = file.path.parent() {
                std::fs::create_dir_all(dir)?;
            }
            std::fs::write(&file.path, &file.contents)
                .with_context(|| format!("writing {}", file.path.display()))?;
            println!("wrote {}", file.path.display());
        }
    }
    if !stale.is_empty() {
        bail!(
            "generated manifests are stale: {}; run `cargo xtask manifests`",
            stale.join(", ")
        );
    }
    if check {
        println!("deploy/ manifests are up to date");
    }
    Ok(())
}

/// A plain line diff: enough to see what changed, with no extra dependency.
fn diff(old: &str, new: &str) -> String {
    let old: Vec<&str> = old.lines().collect();
    let new: Vec<&str> = new.lines().collect();
    // Longest common subsequence table, fine for files of a few hundred lines.
    let mut lcs = vec![vec![0usize; new.len() + 1]; old.len() + 1];
    for i in (0..old.len()).rev() {
        for j in (0..new.len()).rev() {
            lcs[i][j] = if old[i] == new[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, String::new());
    while i < old.len() || j < new.len() {
        if i < old.len() && j < new.len() && old[i] == new[j] {
            i += 1;
            j += 1;
        } else if i < old.len() && (j == new.len() || lcs[i + 1][j] >= lcs[i][j + 1]) {
            let _ = writeln!(out, "-{}", old[i]);
            i += 1;
        } else {
            let _ = writeln!(out, "+{}", new[j]);
            j += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::diff;

    #[test]
    fn diff_marks_removed_and_added_lines_only() {
        let out = diff("a\nb\nc\n", "a\nB\nc\nd\n");
        assert_eq!(out, "-b\n+B\n+d\n");
    }

    #[test]
    fn diff_of_equal_texts_is_empty() {
        assert_eq!(diff("x\ny\n", "x\ny\n"), "");
    }
}
