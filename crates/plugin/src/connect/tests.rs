use super::*;

fn strings(args: &[OsString]) -> Vec<String> {
    args.iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect()
}

fn flags() -> KubectlFlags<'static> {
    KubectlFlags {
        kubeconfig: None,
        context: None,
        namespace: "shop",
    }
}

#[test]
fn postgres_runs_psql_in_the_primarys_database_container() {
    let args = kubectl_args(
        &flags(),
        Engine::Postgres,
        "orders-1",
        false,
        &["-tAc".to_owned(), "select 1".to_owned()],
    );
    assert_eq!(
        strings(&args),
        [
            "--namespace",
            "shop",
            "exec",
            "-i",
            "orders-1",
            "--container",
            "database",
            "--",
            "sh",
            "-c",
            POSTGRES.script,
            "psql",
            "-tAc",
            "select 1",
        ]
    );
}

#[test]
fn each_engine_runs_its_own_client() {
    for (engine, program) in [
        (Engine::Postgres, "psql"),
        (Engine::Mysql, "mysql"),
        (Engine::Mongodb, "mongosh"),
    ] {
        let args = strings(&kubectl_args(&flags(), engine, "orders-0", false, &[]));
        assert_eq!(args.last().map(String::as_str), Some(program));
        let script = &args[args.len() - 2];
        assert!(
            script.contains(&format!("exec {program} ")),
            "{engine}: {script}"
        );
        assert!(script.ends_with(r#" "$@""#), "{engine}: {script}");
    }
}

#[test]
fn a_terminal_gets_a_tty_and_the_connection_flags_are_passed_on() {
    let flags = KubectlFlags {
        kubeconfig: Some(Path::new("/home/me/.kube/prod")),
        context: Some("prod"),
        namespace: "shop",
    };
    let args = strings(&kubectl_args(&flags, Engine::Mysql, "orders-0", true, &[]));
    assert_eq!(
        args[..9],
        [
            "--kubeconfig",
            "/home/me/.kube/prod",
            "--context",
            "prod",
            "--namespace",
            "shop",
            "exec",
            "-i",
            "-t",
        ]
    );
}

/// Runs `engine`'s script under the local `sh` with a stand-in client that prints its
/// arguments and the password variable it was given, as the Pod would with `env`.
fn run_script(engine: Engine, env: &[(&str, &str)], client_args: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let client = client(engine);
    let stub = dir.path().join(client.program);
    std::fs::write(
        &stub,
        "#!/bin/sh\nprintf '%s|' \"$HOME\" \"$PGPASSWORD\" \"$MYSQL_PWD\" \"$@\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&stub, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let output = std::process::Command::new("sh")
        .arg("-c")
        .arg(client.script)
        .arg(client.program)
        .args(client_args)
        .env_clear()
        .env("PATH", format!("{}:/usr/bin:/bin", dir.path().display()))
        .envs(env.iter().copied())
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn postgres_logs_in_as_the_application_user_not_the_superuser() {
    let env = [
        ("POSTGRES_USER", "postgres"),
        ("POSTGRES_PASSWORD", "admin-secret"),
        ("POSTGRES_DB", "app"),
        ("DATABASE_APP_USERNAME", "app"),
        ("DATABASE_APP_PASSWORD", "app-secret"),
    ];
    assert_eq!(
        run_script(Engine::Postgres, &env, &["-tAc", "select 'a b'"]),
        "/tmp|app-secret||--host=127.0.0.1|--username=app|--dbname=app|-tAc|select 'a b'|"
    );
}

#[test]
fn postgres_of_an_earlier_layout_logs_in_as_the_images_user() {
    let env = [
        ("POSTGRES_USER", "app"),
        ("POSTGRES_PASSWORD", "app-secret"),
        ("POSTGRES_DB", "app"),
    ];
    assert_eq!(
        run_script(Engine::Postgres, &env, &[]),
        "/tmp|app-secret||--host=127.0.0.1|--username=app|--dbname=app|"
    );
}

#[test]
fn mysql_logs_in_as_the_images_user_over_the_socket() {
    let env = [
        ("MYSQL_USER", "app"),
        ("MYSQL_PASSWORD", "app-secret"),
        ("MYSQL_DATABASE", "app"),
        ("MYSQL_ROOT_PASSWORD", "root-secret"),
    ];
    assert_eq!(
        run_script(Engine::Mysql, &env, &["-e", "select 1"]),
        "/tmp||app-secret|--protocol=socket|--user=app|--database=app|-e|select 1|"
    );
}

#[test]
fn mongodb_logs_in_as_the_application_user_against_admin() {
    let env = [
        ("MONGO_INITDB_ROOT_USERNAME", "root"),
        ("MONGO_INITDB_ROOT_PASSWORD", "root-secret"),
        ("MONGO_INITDB_DATABASE", "app"),
        ("DATABASE_APP_USERNAME", "app"),
        ("DATABASE_APP_PASSWORD", "app-secret"),
    ];
    assert_eq!(
        run_script(Engine::Mongodb, &env, &["--eval", "1"]),
        "/tmp|||mongodb://127.0.0.1:27017/app?directConnection=true&authSource=admin\
         |--username|app|--password|app-secret|--eval|1|"
    );
}
