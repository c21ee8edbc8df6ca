//! Which cluster and namespace a command talks to, found by kubectl's rules: the
//! `--kubeconfig` file, else the files in `KUBECONFIG`, else `~/.kube/config`, else the
//! in-cluster configuration of a Pod; the `--context` in it, else its current context;
//! the `--namespace`, else the context's, else `default`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use kube::Client;
use kube::config::{Config, KubeConfigOptions, Kubeconfig};

use crate::cli::Connection;
use crate::error::Error;

/// A client and the namespace the command works in.
pub struct Target {
    pub client: Client,
    pub namespace: String,
}

/// Where the configuration comes from.
#[derive(Debug, PartialEq, Eq)]
enum Source {
    /// The one file `--kubeconfig` names.
    File(PathBuf),
    /// `KUBECONFIG`, else `~/.kube/config` (kube reads and merges them as kubectl does).
    Default,
    /// No kubeconfig anywhere: the Pod's service account.
    InCluster,
}

/// Where the configuration comes from, given the flag, the value of `KUBECONFIG` and
/// whether `~/.kube/config` exists. A context asked for by name needs a kubeconfig, so
/// it never falls back to the in-cluster configuration: the loader's error says why.
fn source(
    flag: Option<&Path>,
    env: Option<OsString>,
    home_config_exists: bool,
    context: Option<&str>,
) -> Source {
    if let Some(path) = flag {
        return Source::File(path.to_owned());
    }
    let env_names_a_file =
        env.is_some_and(|v| std::env::split_paths(&v).any(|p| !p.as_os_str().is_empty()));
    if env_names_a_file || home_config_exists || context.is_some() {
        Source::Default
    } else {
        Source::InCluster
    }
}

/// Connects as kubectl would with the same flags.
pub async fn connect(connection: &Connection) -> Result<Target, Error> {
    let options = KubeConfigOptions {
        context: connection.context.clone(),
        ..KubeConfigOptions::default()
    };
    let home_config_exists = std::env::home_dir().is_some_and(|h| h.join(".kube/config").is_file());
    let source = source(
        connection.kubeconfig.as_deref(),
        std::env::var_os("KUBECONFIG"),
        home_config_exists,
        connection.context.as_deref(),
    );
    let config = match source {
        Source::File(path) => {
            let kubeconfig = Kubeconfig::read_from(path).map_err(Error::Kubeconfig)?;
            Config::from_custom_kubeconfig(kubeconfig, &options)
                .await
                .map_err(Error::Kubeconfig)?
        }
        Source::Default => Config::from_kubeconfig(&options)
            .await
            .map_err(Error::Kubeconfig)?,
        Source::InCluster => Config::incluster().map_err(Error::InCluster)?,
    };
    let namespace = connection
        .namespace
        .clone()
        .unwrap_or_else(|| config.default_namespace.clone());
    let client = Client::try_from(config).map_err(Error::Client)?;
    Ok(Target { client, namespace })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flag_wins_over_everything() {
        assert_eq!(
            source(Some(Path::new("/k")), Some("/other".into()), true, None),
            Source::File(PathBuf::from("/k"))
        );
    }

    #[test]
    fn kubeconfig_or_the_home_file_is_read_by_the_default_loader() {
        assert_eq!(
            source(None, Some("/a:/b".into()), false, None),
            Source::Default
        );
        assert_eq!(source(None, None, true, None), Source::Default);
    }

    #[test]
    fn without_any_kubeconfig_the_pods_service_account_is_used() {
        assert_eq!(source(None, None, false, None), Source::InCluster);
        assert_eq!(
            source(None, Some("".into()), false, None),
            Source::InCluster
        );
    }

    #[test]
    fn a_named_context_never_falls_back_to_in_cluster() {
        assert_eq!(source(None, None, false, Some("prod")), Source::Default);
    }
}
