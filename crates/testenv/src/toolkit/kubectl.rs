//! kubectl of the pinned version run as a user runs it against the test's control
//! plane: arguments and standard input in, success and what it printed out.

use std::path::{Component, Path, PathBuf};
use std::process::Stdio;

use tokio::io::AsyncWriteExt as _;

use crate::{ControlPlane, assets};

/// Runs kubectl with `args` against `plane`, `stdin` on its standard input; returns
/// whether it succeeded, its standard output and its standard error. tokio's Command,
/// so what runs on the test's runtime (a controller, a webhook) keeps running meanwhile.
pub async fn kubectl(plane: &ControlPlane, args: &[&str], stdin: &str) -> (bool, String, String) {
    let mut command = tokio::process::Command::from(plane.kubectl().expect("kubectl"));
    command
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().expect("kubectl starts");
    if let Some(mut input) = child.stdin.take() {
        input.write_all(stdin.as_bytes()).await.expect("stdin");
    }
    let output = child.wait_with_output().await.expect("kubectl runs");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Runs kubectl with `args`, which must succeed; returns its standard output.
pub async fn kubectl_ok(plane: &ControlPlane, args: &[&str]) -> String {
    let (ok, stdout, stderr) = kubectl(plane, args, "").await;
    assert!(ok, "kubectl {args:?}: {stderr}");
    stdout
}

/// Runs kubectl with `args`, which must fail; returns its standard error.
pub async fn kubectl_fails(plane: &ControlPlane, args: &[&str]) -> String {
    let (ok, _, stderr) = kubectl(plane, args, "").await;
    assert!(!ok, "kubectl {args:?} should fail");
    stderr
}

/// Runs `command` in container `container` of Pod `namespace/pod` through the API
/// server and the kubelet (`kubectl exec`); its standard output, or everything it
/// printed when it fails.
pub async fn exec(
    plane: &ControlPlane,
    namespace: &str,
    pod: &str,
    container: &str,
    command: &[&str],
) -> Result<String, String> {
    let mut args = vec!["exec", "-n", namespace, pod, "-c", container, "--"];
    args.extend_from_slice(command);
    let (ok, stdout, stderr) = kubectl(plane, &args, "").await;
    if ok {
        Ok(stdout)
    } else {
        Err(stdout + &stderr)
    }
}

/// Writes `overlay/kustomization.yaml`: `deploy/default/kustomization.yaml` (of the
/// `deploy` folder) as a user edits it to turn on some of its optional `components`
/// (`certmanager`, `components/monitoring`, ...), its commented lines uncommented and
/// every path made relative to `overlay`, since kustomize refuses absolute ones.
pub fn default_overlay_with(deploy: &Path, overlay: &Path, components: &[&str]) {
    let default = std::fs::read_to_string(deploy.join("default/kustomization.yaml"))
        .expect("deploy/default/kustomization.yaml");
    let mut edited = default.replace("# components:", "components:");
    for component in components {
        edited = edited.replace(&format!("# - ../{component}"), &format!("- ../{component}"));
    }
    let kustomization: String = edited
        .lines()
        .map(|line| match line.strip_prefix("- ../") {
            Some(rest) => {
                let dir = rest.split_whitespace().next().unwrap_or(rest);
                format!("- {}\n", relative(overlay, &deploy.join(dir)).display())
            }
            None => format!("{line}\n"),
        })
        .collect();
    std::fs::write(overlay.join("kustomization.yaml"), kustomization).expect("overlay written");
}

/// `to` relative to `from`.
fn relative(from: &Path, to: &Path) -> PathBuf {
    let from: Vec<Component> = from.components().collect();
    let to: Vec<Component> = to.components().collect();
    let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let mut path: PathBuf =
        std::iter::repeat_n(Component::ParentDir, from.len() - common).collect();
    path.extend(&to[common..]);
    path
}

/// `kubectl kustomize dir`: the YAML documents it renders, as text.
pub fn kustomize(dir: &Path) -> String {
    let kubectl = assets::find("kubectl").expect("kubectl");
    let output = std::process::Command::new(kubectl)
        .arg("kustomize")
        .arg(dir)
        .output()
        .expect("kubectl kustomize");
    assert!(
        output.status.success(),
        "kubectl kustomize {}: {}",
        dir.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}
