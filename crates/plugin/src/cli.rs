//! The command line: kubectl's own connection flags, accepted anywhere on the line as
//! kubectl accepts them, and one subcommand per task.
//!
//! No flag reads an environment variable of its own: `KUBECONFIG` is read by the
//! kubeconfig loader, which, as kubectl does, takes a list of files in it.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// `kubectl database`: look at and operate the Databases of the database operator.
#[derive(Debug, Parser, PartialEq, Eq)]
#[command(
    name = "kubectl-database",
    bin_name = "kubectl database",
    version,
    about
)]
pub struct Cli {
    #[command(flatten)]
    pub connection: Connection,
    #[command(subcommand)]
    pub command: Command,
}

/// Which cluster, user and namespace, as kubectl takes them.
#[derive(Debug, Args, Clone, Default, PartialEq, Eq)]
pub struct Connection {
    /// Path to the kubeconfig file (else KUBECONFIG, else ~/.kube/config, else the
    /// in-cluster configuration).
    #[arg(long, global = true, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (else its current context).
    #[arg(long, global = true, value_name = "NAME")]
    pub context: Option<String>,
    /// The namespace of the Database (else the context's namespace, else `default`).
    #[arg(short = 'n', long, global = true, value_name = "NAMESPACE")]
    pub namespace: Option<String>,
}

#[derive(Debug, Subcommand, PartialEq, Eq)]
pub enum Command {
    /// Show a Database on one screen: phase, instances, backups, conditions, events.
    Status {
        /// The Database.
        name: String,
    },
    /// Open the engine's client (psql, mysql, mongosh) on the primary, as the
    /// application user.
    Connect {
        /// The Database.
        name: String,
        /// Arguments for the client, after `--` (for example `-- -c 'select 1'`).
        #[arg(last = true, value_name = "CLIENT ARGS")]
        client_args: Vec<String>,
    },
    /// Ask the operator to make another instance the primary.
    Switchover {
        /// The Database.
        name: String,
        /// The instance (Pod) to become the primary.
        #[arg(long, value_name = "POD")]
        to: String,
    },
    /// Take a backup now, to the Database's backup destination.
    Backup {
        /// The Database.
        name: String,
        /// Name of the DatabaseBackup (default `<database>-<UTC yyyymmddhhmmss>`).
        #[arg(long, value_name = "NAME")]
        backup_name: Option<String>,
    },
    /// Stop the operator from changing the Database until it is resumed.
    Pause {
        /// The Database.
        name: String,
    },
    /// Let the operator reconcile a paused Database again.
    Resume {
        /// The Database.
        name: String,
    },
    /// Print the database container's log of the primary, or of another instance.
    Logs {
        /// The Database.
        name: String,
        /// The instance (Pod) to read instead of the primary.
        #[arg(long, value_name = "POD")]
        instance: Option<String>,
        /// Keep printing new lines as they come.
        #[arg(short = 'f', long)]
        follow: bool,
        /// Only the last N lines.
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(i64).range(0..))]
        tail: Option<i64>,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("kubectl-database").chain(args.iter().copied()))
    }

    #[test]
    fn status_takes_a_name_and_the_connection_flags_anywhere() {
        let cli = parse(&["-n", "shop", "status", "orders", "--context", "prod"]).unwrap();
        assert_eq!(
            cli,
            Cli {
                connection: Connection {
                    kubeconfig: None,
                    context: Some("prod".to_owned()),
                    namespace: Some("shop".to_owned()),
                },
                command: Command::Status {
                    name: "orders".to_owned()
                },
            }
        );
        let cli = parse(&[
            "status",
            "orders",
            "--kubeconfig",
            "/tmp/k",
            "--namespace=x",
        ])
        .unwrap();
        assert_eq!(cli.connection.kubeconfig, Some(PathBuf::from("/tmp/k")));
        assert_eq!(cli.connection.namespace.as_deref(), Some("x"));
    }

    #[test]
    fn connect_passes_everything_after_the_double_dash_to_the_client() {
        let cli = parse(&["connect", "orders", "-n", "shop", "--", "-tAc", "select 1"]).unwrap();
        assert_eq!(
            cli.command,
            Command::Connect {
                name: "orders".to_owned(),
                client_args: vec!["-tAc".to_owned(), "select 1".to_owned()],
            }
        );
        assert_eq!(cli.connection.namespace.as_deref(), Some("shop"));
        let cli = parse(&["connect", "orders", "--", "-n", "x"]).unwrap();
        assert_eq!(
            cli.connection.namespace, None,
            "after -- it is the client's"
        );
        assert!(matches!(
            parse(&["connect", "orders"]).unwrap().command,
            Command::Connect { client_args, .. } if client_args.is_empty()
        ));
    }

    #[test]
    fn switchover_needs_the_instance_to_promote() {
        assert_eq!(
            parse(&["switchover", "orders", "--to", "orders-1"])
                .unwrap()
                .command,
            Command::Switchover {
                name: "orders".to_owned(),
                to: "orders-1".to_owned()
            }
        );
        let error = parse(&["switchover", "orders"]).unwrap_err();
        assert_eq!(
            error.kind(),
            clap::error::ErrorKind::MissingRequiredArgument
        );
    }

    #[test]
    fn backup_takes_an_optional_name() {
        assert_eq!(
            parse(&["backup", "orders"]).unwrap().command,
            Command::Backup {
                name: "orders".to_owned(),
                backup_name: None
            }
        );
        assert_eq!(
            parse(&["backup", "orders", "--backup-name", "before-migration"])
                .unwrap()
                .command,
            Command::Backup {
                name: "orders".to_owned(),
                backup_name: Some("before-migration".to_owned())
            }
        );
    }

    #[test]
    fn pause_and_resume_take_a_name() {
        assert_eq!(
            parse(&["pause", "orders"]).unwrap().command,
            Command::Pause {
                name: "orders".to_owned()
            }
        );
        assert_eq!(
            parse(&["resume", "orders"]).unwrap().command,
            Command::Resume {
                name: "orders".to_owned()
            }
        );
    }

    #[test]
    fn logs_take_an_instance_follow_and_tail() {
        assert_eq!(
            parse(&[
                "logs",
                "orders",
                "-f",
                "--tail",
                "20",
                "--instance",
                "orders-1"
            ])
            .unwrap()
            .command,
            Command::Logs {
                name: "orders".to_owned(),
                instance: Some("orders-1".to_owned()),
                follow: true,
                tail: Some(20),
            }
        );
        assert!(parse(&["logs", "orders", "--tail", "many"]).is_err());
        assert!(parse(&["logs", "orders", "--tail", "-1"]).is_err());
    }

    #[test]
    fn a_name_is_required_and_unknown_commands_are_refused() {
        assert!(parse(&["status"]).is_err());
        assert_eq!(
            parse(&["explode", "orders"]).unwrap_err().kind(),
            clap::error::ErrorKind::InvalidSubcommand
        );
    }

    #[test]
    fn the_command_line_definition_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
