//! The operator's own programs run against a test control plane: the command line they
//! take there.

use std::path::Path;

/// The controller's flags against a test control plane: the kubeconfig at `kubeconfig`,
/// metrics and health probes on ports the kernel picks (so that controllers started
/// side by side never collide), and plain logs.
pub fn controller_args(kubeconfig: &Path) -> Vec<String> {
    vec![
        format!("--kubeconfig={}", kubeconfig.display()),
        "--metrics-bind-address=127.0.0.1:0".to_owned(),
        "--health-probe-bind-address=127.0.0.1:0".to_owned(),
        "--log-format=plain".to_owned(),
    ]
}
