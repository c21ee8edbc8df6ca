//! A Debian root filesystem as a tar, made by mmdebstrap from a recipe: the image's user
//! first (so the packages find it with the official images' uid), then the packages,
//! then the recipe's files and setup commands.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, bail};
use testenv::images::Recipe;

/// Where Debian packages come from; `DEBIAN_MIRROR` overrides it.
fn mirror() -> String {
    std::env::var("DEBIAN_MIRROR").unwrap_or_else(|_| "http://deb.debian.org/debian".to_owned())
}

/// The apt sources for `suite`: the stable suites take their updates and security fixes.
pub fn sources(suite: &str) -> Vec<String> {
    let mirror = mirror();
    let mut lines = vec![format!("deb {mirror} {suite} main")];
    if !matches!(suite, "sid" | "unstable" | "experimental") {
        lines.push(format!("deb {mirror} {suite}-updates main"));
        let security = mirror.replace("/debian", "/debian-security");
        lines.push(format!("deb {security} {suite}-security main"));
    }
    lines
}

/// Shell run before any package is installed: the user, its group, and preseeded files.
pub fn essential_hook(recipe: &Recipe) -> String {
    let user = &recipe.user;
    let mut hook = format!(
        "echo '{name}:x:{uid}:' >> \"$1/etc/group\"; \
         echo '{name}:x:{uid}:{uid}::{home}:/bin/bash' >> \"$1/etc/passwd\"; \
         if [ -f \"$1/etc/shadow\" ]; then echo '{name}:!:::::::' >> \"$1/etc/shadow\"; fi",
        name = user.name,
        uid = user.uid,
        home = user.home,
    );
    for (path, contents) in recipe.preseed {
        let _ = write!(
            hook,
            "; mkdir -p \"$1$(dirname {path})\"; printf '%s' '{contents}' > \"$1{path}\"",
            contents = contents.replace('\'', r"'\''"),
        );
    }
    hook
}

/// Builds the root filesystem of `recipe` into `out` (a tar). `files` holds each of the
/// recipe's files, written out, in the recipe's order; `downloaded` pairs each fetched
/// file or tree with where it goes in the image.
pub fn build(
    recipe: &Recipe,
    files: &[&Path],
    downloaded: &[(PathBuf, &str)],
    out: &Path,
    log: &Path,
) -> anyhow::Result<()> {
    let mut command = Command::new("mmdebstrap");
    command
        .arg("--variant=minbase")
        // Mirrors that serve a snapshot carry Release files past their Valid-Until.
        .arg("--aptopt=Acquire::Check-Valid-Until \"false\"")
        .arg(format!("--include={}", recipe.packages.join(",")))
        .arg(format!("--essential-hook={}", essential_hook(recipe)));
    for exclude in [
        "/usr/share/doc/*",
        "/usr/share/man/*",
        "/usr/share/locale/*/LC_MESSAGES/*",
    ] {
        command.arg(format!("--dpkgopt=path-exclude={exclude}"));
    }
    for (source, target) in downloaded {
        command.arg(format!(
            "--customize-hook=mkdir -p \"$1$(dirname {target})\" && cp -a {} \"$1{target}\"",
            source.display()
        ));
    }
    for ((path, _, mode), file) in recipe.files.iter().zip(files) {
        command.arg(format!(
            "--customize-hook=mkdir -p \"$1$(dirname {path})\" && cp {} \"$1{path}\" && chmod {mode:o} \"$1{path}\"",
            file.display()
        ));
    }
    for line in recipe.setup {
        command.arg(format!(
            "--customize-hook=chroot \"$1\" sh -ec '{}'",
            line.replace('\'', r"'\''")
        ));
    }
    command.arg(
        "--customize-hook=rm -rf \"$1\"/var/lib/apt/lists/* \"$1\"/var/cache/apt/* \"$1\"/var/log/*.log",
    );
    command
        .arg(recipe.suite)
        .arg(out)
        .args(sources(recipe.suite));
    let log_file = std::fs::File::create(log)?;
    let status = command
        .stdin(Stdio::null())
        .stdout(log_file.try_clone()?)
        .stderr(log_file)
        .status()
        .context("running mmdebstrap (apt-get install mmdebstrap)")?;
    if !status.success() {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(20).collect();
        bail!(
            "mmdebstrap failed with {status}; the last lines of {}:\n{}",
            log.display(),
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
    }
    Ok(())
}

/// The installed version of `package` in the root filesystem tar `rootfs`.
pub fn installed_version(rootfs: &Path, package: &str) -> anyhow::Result<String> {
    let output = Command::new("tar")
        .arg("-xOf")
        .arg(rootfs)
        .arg("./var/lib/dpkg/status")
        .output()
        .context("running tar")?;
    if !output.status.success() {
        bail!("no dpkg status in {}", rootfs.display());
    }
    version_in_status(&String::from_utf8_lossy(&output.stdout), package)
        .with_context(|| format!("{package} is not installed in {}", rootfs.display()))
}

fn version_in_status(status: &str, package: &str) -> Option<String> {
    status.split("\n\n").find_map(|stanza| {
        let mut lines = stanza.lines();
        lines
            .clone()
            .any(|l| l == format!("Package: {package}"))
            .then(|| lines.find_map(|l| l.strip_prefix("Version: ").map(str::to_owned)))
            .flatten()
    })
}

/// The upstream part of a Debian version: `1:11.8.9+ds-1` gives `11.8.9`.
pub fn upstream_version(debian: &str) -> String {
    let without_epoch = debian.split_once(':').map_or(debian, |(_, v)| v);
    let without_revision = without_epoch
        .rsplit_once('-')
        .map_or(without_epoch, |(v, _)| v);
    without_revision
        .split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .next()
        .unwrap_or_default()
        .trim_end_matches('.')
        .to_owned()
}

/// Tags for an upstream version: `9.7.4` gives `9`, `9.7` and `9.7.4`.
pub fn tags(upstream: &str) -> Vec<String> {
    let parts: Vec<&str> = upstream.split('.').filter(|p| !p.is_empty()).collect();
    (1..=parts.len()).map(|n| parts[..n].join(".")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_versions_drop_epoch_revision_and_repack_suffix() {
        assert_eq!(upstream_version("17.12-0+deb13u1"), "17.12");
        assert_eq!(upstream_version("1:11.8.9+ds-0+deb13u1"), "11.8.9");
        assert_eq!(upstream_version("9.7.4-2"), "9.7.4");
    }

    #[test]
    fn every_prefix_of_the_version_is_a_tag() {
        assert_eq!(tags("9.7.4"), ["9", "9.7", "9.7.4"]);
        assert_eq!(tags("18.6"), ["18", "18.6"]);
    }

    #[test]
    fn the_version_comes_from_the_named_package_stanza() {
        let status = "Package: libpq5\nStatus: install ok installed\nVersion: 17.1-1\n\n\
                      Package: postgresql-17\nStatus: install ok installed\nVersion: 17.12-0+deb13u1\n";
        assert_eq!(
            version_in_status(status, "postgresql-17").as_deref(),
            Some("17.12-0+deb13u1")
        );
        assert_eq!(version_in_status(status, "mysql-server-core"), None);
    }

    #[test]
    fn stable_suites_also_take_updates_and_security_fixes() {
        assert_eq!(sources("sid").len(), 1);
        let bookworm = sources("bookworm");
        assert_eq!(bookworm.len(), 3);
        assert!(bookworm[2].contains("debian-security bookworm-security"));
    }

    #[test]
    fn the_user_is_created_with_the_recipe_uid_before_packages() {
        let recipe = testenv::images::recipe("postgres-17").expect("recipe");
        let hook = essential_hook(recipe);
        assert!(
            hook.contains("postgres:x:999:999::/var/lib/postgresql:/bin/bash"),
            "{hook}"
        );
        assert!(hook.contains("create_main_cluster = false"), "{hook}");
    }
}
