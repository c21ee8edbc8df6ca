//! `connect NAME [-- CLIENT ARGS...]`: the engine's own client (psql, mysql, mongosh)
//! in the primary's database container, through `kubectl exec`, logged in as the
//! application user.
//!
//! The password never leaves the Pod: the container already has it in its environment
//! (the operator sets the image's variables from the credentials Secret), and a small
//! `sh -c` script inside the Pod hands it to the client. The plugin needs no right to
//! read Secrets, only `pods/exec`. The user's arguments reach the client as `"$@"`, so
//! nothing of theirs is ever parsed by that shell.

use std::ffi::OsString;
use std::io::IsTerminal as _;
use std::path::Path;
use std::process::ExitCode;

use database_api::Engine;

use crate::cli::Connection;
use crate::cluster::Target;
use crate::database;
use crate::error::Error;
use crate::instances;

/// The container the engine runs in, in every instance's Pod.
pub const CONTAINER: &str = "database";

/// How to start one engine's client inside its container.
struct Client {
    /// The client's name: `$0` of the script, which is what error messages show.
    program: &'static str,
    /// The script `sh -c` runs; the client's arguments follow as `"$@"`.
    script: &'static str,
}

// HOME=/tmp: the root filesystem is read-only and the clients write their history
// (psql, mysql) or their logs (mongosh) under HOME; /tmp is the Pod's scratch volume.
//
// The application user: postgres and mongodb Pods have it in DATABASE_APP_USERNAME and
// DATABASE_APP_PASSWORD, beside the image's superuser variables; Pods of Databases
// created by earlier versions of the operator have no such variables, because there the
// image's own user is the application user, hence the `:-` fallbacks. mysql's image user
// (MYSQL_USER) is the application user in every layout.
const POSTGRES: Client = Client {
    program: "psql",
    script: r#"export HOME=/tmp PGPASSWORD="${DATABASE_APP_PASSWORD:-$POSTGRES_PASSWORD}"; exec psql --host=127.0.0.1 --username="${DATABASE_APP_USERNAME:-$POSTGRES_USER}" --dbname="$POSTGRES_DB" "$@""#,
};

// Over the socket: mysql counts it as a secure transport, so the password is sent as is.
const MYSQL: Client = Client {
    program: "mysql",
    script: r#"export HOME=/tmp MYSQL_PWD="$MYSQL_PASSWORD"; exec mysql --protocol=socket --user="$MYSQL_USER" --database="$MYSQL_DATABASE" "$@""#,
};

// The application user is defined in `admin`; directConnection, because this one
// server is the one to talk to, whatever the replica set says.
const MONGODB: Client = Client {
    program: "mongosh",
    script: r#"export HOME=/tmp; exec mongosh "mongodb://127.0.0.1:27017/$MONGO_INITDB_DATABASE?directConnection=true&authSource=admin" --username "${DATABASE_APP_USERNAME:-$MONGO_INITDB_ROOT_USERNAME}" --password "${DATABASE_APP_PASSWORD:-$MONGO_INITDB_ROOT_PASSWORD}" "$@""#,
};

fn client(engine: Engine) -> &'static Client {
    match engine {
        Engine::Postgres => &POSTGRES,
        Engine::Mysql => &MYSQL,
        Engine::Mongodb => &MONGODB,
    }
}

/// The connection flags kubectl is given, so it reaches the same cluster, as the same
/// user, in the same namespace as the plugin.
pub struct KubectlFlags<'a> {
    pub kubeconfig: Option<&'a Path>,
    pub context: Option<&'a str>,
    pub namespace: &'a str,
}

/// The arguments of `kubectl` that run `engine`'s client in Pod `pod` with
/// `client_args`. `-i` always, so piped input (a script) reaches the client; `-t` only
/// when `tty` (standard input is a terminal), as `kubectl exec` itself advises.
pub fn kubectl_args(
    flags: &KubectlFlags<'_>,
    engine: Engine,
    pod: &str,
    tty: bool,
    client_args: &[String],
) -> Vec<OsString> {
    let client = client(engine);
    let mut args: Vec<OsString> = Vec::new();
    if let Some(kubeconfig) = flags.kubeconfig {
        args.push("--kubeconfig".into());
        args.push(kubeconfig.into());
    }
    if let Some(context) = flags.context {
        args.extend(["--context".into(), context.into()]);
    }
    args.extend(["--namespace".into(), flags.namespace.into()]);
    args.extend(["exec".into(), "-i".into()]);
    if tty {
        args.push("-t".into());
    }
    args.extend(
        [
            pod,
            "--container",
            CONTAINER,
            "--",
            "sh",
            "-c",
            client.script,
            client.program,
        ]
        .map(OsString::from),
    );
    args.extend(client_args.iter().map(OsString::from));
    args
}

/// Runs the client on the primary of Database `name` and ends as it ends: its exit
/// code is the plugin's, so `connect ... -- -c 'select 1'` can be scripted.
pub async fn run(
    target: &Target,
    connection: &Connection,
    name: &str,
    client_args: &[String],
) -> Result<ExitCode, Error> {
    let db = database::get(target, name).await?;
    let pod = instances::primary(&db).map_err(|reason| Error::NoInstance {
        action: format!("connecting to {name}"),
        reason,
    })?;
    let flags = KubectlFlags {
        kubeconfig: connection.kubeconfig.as_deref(),
        context: connection.context.as_deref(),
        namespace: &target.namespace,
    };
    let tty = std::io::stdin().is_terminal();
    let args = kubectl_args(&flags, db.spec.engine, pod, tty, client_args);
    let status = tokio::process::Command::new("kubectl")
        .args(args)
        .status()
        .await
        .map_err(|source| Error::RunKubectl {
            program: "kubectl".into(),
            source,
        })?;
    // A client killed by a signal has no code; it failed all the same.
    let code = status
        .code()
        .and_then(|c| u8::try_from(c).ok())
        .unwrap_or(1);
    Ok(ExitCode::from(code))
}

#[cfg(test)]
mod tests;
