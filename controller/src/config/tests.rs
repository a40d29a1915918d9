//! `Config::resolve`: defaults, the file, flags over it, refusals.

use super::*;
use clap::Parser;

fn cli(args: &[&str]) -> Cli {
    let mut all = vec!["pamd"];
    all.extend_from_slice(args);
    Cli::try_parse_from(all).unwrap()
}

fn resolve(text: Option<&str>, cli: &Cli) -> anyhow::Result<Config> {
    Config::resolve(
        text.map(|t| (Path::new("pamd.toml"), t)),
        cli,
        Some(Path::new("/home/op")),
    )
}

/// Asserts that a file (with no flags) is refused with an error naming
/// `part`.
fn assert_refused(text: &str, part: &str) {
    let err = refused(text);
    assert!(err.contains(part), "{err}");
}

/// The error a file (with no flags) is refused with.
fn refused(text: &str) -> String {
    resolve(Some(text), &Cli::default())
        .unwrap_err()
        .to_string()
}

#[test]
fn defaults_are_the_seeds() {
    let c = resolve(None, &Cli::default()).unwrap();
    assert_eq!(c.listen, "127.0.0.1:7700");
    assert_eq!(c.data_dir, PathBuf::from("/home/op/.local/share/pam"));
    assert_eq!(c.database_url, None);
    assert!(!c.local_worker);
    assert_eq!(c.hosts.heartbeat_seconds, 30);
    assert_eq!(c.hosts.offline_after_seconds, 90);
    assert_eq!(c.dispatch.timeout_seconds, 300);
    assert_eq!(c.retention.events_days, 30);
    assert_eq!(c.tls, Tls::Off);
    assert_eq!(c.database.max_connections, 16);
    assert_eq!(c.leader.lease_seconds, 15);
    assert_eq!(c.loops.resync_ms, 1000);
}

#[test]
fn tls_from_the_file_and_from_flags() {
    let text = "[tls]\ncert_file = \"~/c.pem\"\nkey_file = \"/k.pem\"\n";
    let c = resolve(Some(text), &Cli::default()).unwrap();
    assert_eq!(
        c.tls,
        Tls::Files {
            cert_file: PathBuf::from("/home/op/c.pem"),
            key_file: PathBuf::from("/k.pem")
        }
    );
    let c = resolve(Some(text), &cli(&["--tls-self-signed"])).unwrap();
    assert_eq!(c.tls, Tls::SelfSigned, "a flag replaces the table");
    let c = resolve(Some("[tls]\nself_signed = true\n"), &Cli::default()).unwrap();
    assert_eq!(c.tls, Tls::SelfSigned);
    let err = resolve(None, &cli(&["--tls-cert", "/c.pem"])).unwrap_err();
    assert!(err.to_string().contains("--tls-key"), "{err}");
    assert_refused("[tls]\nkey_file = \"/k\"\n", "cert_file");
    let both = "[tls]\ncert_file = \"/c\"\nkey_file = \"/k\"\nself_signed = true\n";
    assert!(resolve(Some(both), &Cli::default()).is_err());
    assert!(Cli::try_parse_from(["pamd", "--tls-self-signed", "--tls-cert", "/c"]).is_err());
}

#[test]
fn file_sets_every_key() {
    let text = r#"
        listen = "0.0.0.0:9000"
        data_dir = "~/pamdata"
        database_url = "postgresql://db/pam"
        [hosts]
        heartbeat_seconds = 10
        offline_after_seconds = 40
        [dispatch]
        timeout_seconds = 60
        [retention]
        events_days = 7
        [loops]
        resync_ms = 200
    "#;
    let c = resolve(Some(text), &Cli::default()).unwrap();
    assert_eq!(c.listen, "0.0.0.0:9000");
    assert_eq!(c.data_dir, PathBuf::from("/home/op/pamdata"));
    assert_eq!(c.database_url.as_deref(), Some("postgresql://db/pam"));
    assert_eq!(c.hosts.heartbeat_seconds, 10);
    assert_eq!(c.hosts.offline_after_seconds, 40);
    assert_eq!(c.dispatch.timeout_seconds, 60);
    assert_eq!(c.retention.events_days, 7);
    assert_eq!(c.loops.resync_ms, 200);
}

#[test]
fn a_partial_table_keeps_the_other_defaults() {
    let c = resolve(Some("[hosts]\nheartbeat_seconds = 5\n"), &Cli::default()).unwrap();
    assert_eq!(c.hosts.heartbeat_seconds, 5);
    assert_eq!(c.hosts.offline_after_seconds, 90);
}

#[test]
fn flags_override_the_file() {
    let text = "listen = \"0.0.0.0:9000\"\ndata_dir = \"/srv/pam\"\n";
    let c = resolve(
        Some(text),
        &cli(&[
            "--listen",
            "127.0.0.1:1",
            "--data-dir",
            "/tmp/x",
            "--database-url",
            "postgresql://h/db",
            "--local-worker",
        ]),
    )
    .unwrap();
    assert_eq!(c.listen, "127.0.0.1:1");
    assert_eq!(c.data_dir, PathBuf::from("/tmp/x"));
    assert_eq!(c.database_url.as_deref(), Some("postgresql://h/db"));
    assert!(c.local_worker);
}

#[test]
fn git_credentials_come_from_files_that_exist() {
    let dir = tempfile::tempdir().unwrap();
    let creds = dir.path().join("creds");
    std::fs::write(&creds, "https://u:t@example.com\n").unwrap();
    let text = format!(
        "[git]\ncredentials_file = {:?}\n",
        creds.display().to_string()
    );
    let c = resolve(Some(&text), &Cli::default()).unwrap();
    assert_eq!(c.git.credentials_file, Some(creds));
    assert_eq!(c.git.ssh_key_file, None);
    assert_eq!(
        resolve(None, &Cli::default()).unwrap().git,
        GitAuth::default()
    );
    let err = refused("[git]\nssh_key_file = \"/nope/key\"\n");
    assert!(
        err.contains("[git] ssh_key_file") && err.contains("/nope/key"),
        "{err}"
    );
}

#[test]
fn unknown_keys_are_named() {
    let msg = refused("[retention]\nevent_days = 3\n");
    assert!(msg.contains("pamd.toml"), "{msg}");
    assert!(msg.contains("event_days"), "{msg}");
    assert!(!msg.contains('\n'), "one line: {msg}");

    assert_refused("lisen = \"x\"\n", "lisen");
}

#[test]
fn nonsense_thresholds_are_refused() {
    assert_refused(
        "[hosts]\nheartbeat_seconds = 90\noffline_after_seconds = 30\n",
        "offline_after_seconds",
    );
    assert_refused("[loops]\nresync_ms = 5\n", "resync_ms");
    assert_refused("[retention]\nevents_days = 0\n", "events_days");
}

#[test]
fn wrong_types_are_errors() {
    assert_refused("[dispatch]\ntimeout_seconds = \"5m\"\n", "pamd.toml");
}

#[test]
fn clock_file_is_a_hidden_flag() {
    let c = cli(&["--clock-file", "/tmp/now"]);
    assert_eq!(c.clock_file, Some(PathBuf::from("/tmp/now")));
    assert_eq!(Cli::default().clock_file, None);
    let help = <Cli as clap::CommandFactory>::command()
        .render_long_help()
        .to_string();
    assert!(!help.contains("clock-file"), "{help}");
    assert!(help.contains("--secrets-key-file"), "{help}");
}

#[test]
fn webhook_allow_networks_are_cidrs_checked_at_load() {
    let text = "[webhooks]\nallow_networks = [\"127.0.0.0/8\", \"::1\"]\n";
    let c = resolve(Some(text), &Cli::default()).unwrap();
    let egress = c.webhooks.settings().egress;
    assert!(egress.check("127.0.0.1".parse().unwrap()).is_ok());
    assert!(egress.check("::1".parse().unwrap()).is_ok());
    assert!(egress.check("10.0.0.1".parse().unwrap()).is_err());
    let c = resolve(None, &Cli::default()).unwrap();
    assert!(c.webhooks.settings().egress.allow.is_empty());
    let text = "[webhooks]\nallow_networks = [\"10.0.0.0/8\", \"intranet\"]\n";
    let err = refused(text);
    assert!(
        err.starts_with(
            "[webhooks] allow_networks: \"intranet\" is not a network, expected a CIDR"
        ),
        "{err}"
    );
}

#[test]
fn sources_name_the_roots_directory_sources_may_read() {
    let c = resolve(None, &Cli::default()).unwrap();
    assert!(c.sources.allowed_roots.is_empty(), "the data dir alone");
    assert_eq!(c.sources.settle_ms, 1000);
    let text = "[sources]\nallowed_roots = [\"~/trees\", \"/srv/pam\"]\nsettle_ms = 250\n";
    let c = resolve(Some(text), &Cli::default()).unwrap();
    assert_eq!(
        c.sources.allowed_roots,
        [PathBuf::from("/home/op/trees"), PathBuf::from("/srv/pam")]
    );
    assert_eq!(c.sources.settle_ms, 250);
    let err = refused("[sources]\nallowed_roots = [\"rel\"]\n");
    assert!(
        err.contains("[sources] allowed_roots: rel is relative"),
        "{err}"
    );
}

/// The session timeouts and the failed-authentication budget
/// are read, defaulted and refused when they would mean "no limit".
#[test]
fn database_timeouts_and_the_auth_failure_budget() {
    use std::time::Duration as D;
    let c = resolve(None, &Cli::default()).unwrap();
    let s = c.database.settings();
    assert_eq!(
        (
            s.acquire_timeout,
            s.idle_in_transaction_timeout,
            s.lock_timeout,
            s.statement_timeout
        ),
        (
            D::from_secs(1),
            D::from_secs(5),
            D::from_secs(3),
            D::from_secs(60)
        )
    );
    let b = c.rate_limits.budgets().unwrap().auth_failures;
    assert_eq!((b.per_second, b.burst), (5.0, 60.0));
    let text = "[database]\nlock_timeout_ms = 500\nidle_in_transaction_timeout_ms = 1000\n\
                [rate_limits]\nauth_failures_burst = 7\n";
    let c = resolve(Some(text), &Cli::default()).unwrap();
    assert_eq!(c.database.settings().lock_timeout, D::from_millis(500));
    assert_eq!(
        c.database.settings().idle_in_transaction_timeout,
        D::from_secs(1)
    );
    assert_eq!(c.rate_limits.budgets().unwrap().auth_failures.burst, 7.0);
    for bad in [
        "[database]\nlock_timeout_ms = 0\n",
        "[database]\nstatement_timeout_ms = 0\n",
        "[rate_limits]\nauth_failures_burst = 0\n",
        "[rate_limits]\nauth_failures_per_second = 0\n",
    ] {
        assert!(resolve(Some(bad), &Cli::default()).is_err(), "{bad}");
    }
}

#[test]
fn the_apply_body_limit_is_configurable_and_sane() {
    let c = resolve(None, &Cli::default()).unwrap();
    assert_eq!(c.api.max_body_bytes, 16 << 20);
    let c = resolve(Some("[api]\nmax_body_bytes = 67108864\n"), &Cli::default()).unwrap();
    assert_eq!(c.api.max_body_bytes, 64 << 20);
    assert_refused("[api]\nmax_body_bytes = 1000\n", "max_body_bytes");
}
