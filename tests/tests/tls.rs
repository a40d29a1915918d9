//! pamd over HTTPS. A test CA made here with rcgen; real pamd,
//! real pam-worker and real pamctl verifying pamd's certificate.

use std::path::{Path, PathBuf};
use std::time::Duration;

use pam_controller::server::tls::certs::Ca;
use pam_tests::worker::{
    apply, fake, project_yaml, run_yaml, wait_online, wait_phase, Worker, FAST_PAMD_TOML,
};
use pam_tests::{eventually, fails, ok, Pamd, PamdOptions};

const T: Duration = Duration::from_secs(60);

/// A CA and a server pair for localhost/127.0.0.1, written to `dir`.
struct TestPki {
    ca_file: PathBuf,
    cert_file: PathBuf,
    key_file: PathBuf,
}

fn pki(dir: &Path, tag: &str) -> TestPki {
    std::fs::create_dir_all(dir).unwrap();
    let ca = Ca::new(&format!("pam test CA {tag}")).unwrap();
    let issued = ca
        .issue(&["localhost".to_string(), "127.0.0.1".to_string()])
        .unwrap();
    let p = TestPki {
        ca_file: dir.join(format!("ca-{tag}.pem")),
        cert_file: dir.join(format!("server-{tag}.pem")),
        key_file: dir.join(format!("server-{tag}.key")),
    };
    std::fs::write(&p.ca_file, ca.cert_pem()).unwrap();
    std::fs::write(&p.cert_file, issued.cert_pem).unwrap();
    std::fs::write(&p.key_file, issued.key_pem).unwrap();
    p
}

async fn https_pamd(pki: &TestPki, extra_args: &[&str]) -> Pamd {
    let mut args = vec![
        "--tls-cert".to_string(),
        pki.cert_file.display().to_string(),
        "--tls-key".to_string(),
        pki.key_file.display().to_string(),
    ];
    args.extend(extra_args.iter().map(|s| s.to_string()));
    Pamd::start(PamdOptions {
        config_toml: FAST_PAMD_TOML.to_string(),
        args,
        https_ca: Some(pki.ca_file.clone()),
        ..PamdOptions::default()
    })
    .await
    .unwrap()
}

/// A client trusting only `ca`.
fn trusting(ca: &Path) -> reqwest::Client {
    let pem = std::fs::read(ca).unwrap();
    let mut b = reqwest::Client::builder().tls_built_in_root_certs(false);
    for c in reqwest::Certificate::from_pem_bundle(&pem).unwrap() {
        b = b.add_root_certificate(c);
    }
    b.build().unwrap()
}

#[tokio::test]
async fn a_run_reaches_running_over_tls_and_no_plain_port_is_open() {
    let tmp = tempfile::tempdir().unwrap();
    let pki = pki(tmp.path(), "a");
    let pamd = https_pamd(&pki, &[]).await;
    assert!(pamd.url.starts_with("https://"), "{}", pamd.url);

    // The worker trusts the CA through worker.toml's ca_file.
    let w = Worker::start(&pamd, "h1").await.unwrap();
    wait_online(&pamd, "h1").await;
    // pamctl trusts it through PAM_CA_FILE.
    apply(
        &pamd,
        &format!(
            "{}---\n{}",
            project_yaml(),
            run_yaml("r1", w.tmp(), &fake(&["--lines", "1", "--hang"]), "")
        ),
    );
    wait_phase(&pamd, "r1", "running", T).await;
    let out = ok(&pamd.pamctl(&["get", "runs", "-p", "e2e"]));
    assert!(out.contains("r1"), "{out}");

    // The same port does not speak plain HTTP.
    let plain = pamd.url.replacen("https://", "http://", 1);
    let r = reqwest::Client::new()
        .get(format!("{plain}/healthz"))
        .timeout(Duration::from_secs(5))
        .send()
        .await;
    assert!(r.is_err(), "plain HTTP answered: {r:?}");
    // And --ca-file on the command line works as the env does.
    let mut cmd = pamd.isolated(&pam_tests::bin("pamctl"), Some(&pamd.token));
    cmd.env_remove("PAM_CA_FILE")
        .arg("--ca-file")
        .arg(&pki.ca_file)
        .args(["get", "hosts"]);
    let out = cmd.output().unwrap();
    assert!(ok(&out).contains("h1"));
}

#[tokio::test]
async fn a_wrong_ca_is_refused_with_a_clear_message() {
    let tmp = tempfile::tempdir().unwrap();
    let good = pki(&tmp.path().join("good"), "good");
    let other = pki(&tmp.path().join("other"), "other");
    let pamd = https_pamd(&good, &[]).await;

    let mut cmd = pamd.isolated(&pam_tests::bin("pamctl"), Some(&pamd.token));
    cmd.env("PAM_CA_FILE", &other.ca_file)
        .args(["get", "hosts"]);
    let err = fails(&cmd.output().unwrap(), 4);
    assert!(
        err.contains("certificate was refused") && err.contains("unknown authority"),
        "{err}"
    );
    assert!(err.contains("--ca-file"), "a hint to pass the CA: {err}");

    // Without any CA file: the public roots do not know a private CA.
    let mut cmd = pamd.isolated(&pam_tests::bin("pamctl"), Some(&pamd.token));
    cmd.env_remove("PAM_CA_FILE").args(["get", "hosts"]);
    let err = fails(&cmd.output().unwrap(), 4);
    assert!(err.contains("unknown authority"), "{err}");

    // A worker with the wrong CA says so in its log and never registers.
    let token = pam_tests::worker::create_worker_token(&pamd, "h2")
        .await
        .unwrap();
    let toml = format!("ca_file = {:?}\n", other.ca_file.display().to_string());
    let w = Worker::start_with_token(&pamd.url, &token, "h2", &toml).unwrap();
    eventually(
        T,
        "the worker's log names the certificate problem",
        || async {
            let log = w.log();
            (log.contains("unknown authority") && log.contains("--ca-file")).then_some(())
        },
    )
    .await;

    // A certificate for another name: the host name is the problem.
    let ca = Ca::new("pam test CA name").unwrap();
    let issued = ca.issue(&["pam.invalid".to_string()]).unwrap();
    let ca_file = tmp.path().join("ca-name.pem");
    std::fs::write(&ca_file, ca.cert_pem()).unwrap();
    std::fs::write(&good.cert_file, issued.cert_pem).unwrap();
    std::fs::write(&good.key_file, issued.key_pem).unwrap();
    let mut last = String::new();
    for _ in 0..50 {
        let mut cmd = pamd.isolated(&pam_tests::bin("pamctl"), Some(&pamd.token));
        cmd.env("PAM_CA_FILE", &ca_file).args(["get", "hosts"]);
        last = String::from_utf8_lossy(&cmd.output().unwrap().stderr).into_owned();
        if last.contains("not valid for this host name") {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("no host-name error after the reload: {last}");
}

#[tokio::test]
async fn a_replaced_certificate_is_served_to_new_connections() {
    let tmp = tempfile::tempdir().unwrap();
    let first = pki(&tmp.path().join("1"), "1");
    let second = pki(&tmp.path().join("2"), "2");
    let pamd = https_pamd(&first, &[]).await;
    let url = format!("{}/healthz", pamd.url);
    assert!(trusting(&second.ca_file).get(&url).send().await.is_err());

    // A broken pair keeps the old one.
    std::fs::write(&first.cert_file, "-----BEGIN CERTIFICATE-----\nnope\n").unwrap();
    eventually(T, "pamd logs the bad pair", || async {
        pamd.log()
            .contains("still serving the old one")
            .then_some(())
    })
    .await;
    let r = trusting(&first.ca_file).get(&url).send().await.unwrap();
    assert!(r.status().is_success());

    // Rotation: replace the files (atomically, as an operator should).
    for (from, to) in [
        (&second.key_file, &first.key_file),
        (&second.cert_file, &first.cert_file),
    ] {
        let tmp_to = to.with_extension("new");
        std::fs::copy(from, &tmp_to).unwrap();
        std::fs::rename(&tmp_to, to).unwrap();
    }
    eventually(T, "a new connection sees the new certificate", || async {
        // A fresh client each time: a new connection, a new handshake.
        trusting(&second.ca_file)
            .get(&url)
            .send()
            .await
            .ok()
            .filter(|r| r.status().is_success())
    })
    .await;
    assert!(trusting(&first.ca_file).get(&url).send().await.is_err());
    assert!(pamd.log().contains("TLS certificate reloaded"));
}

#[tokio::test]
async fn self_signed_with_a_local_worker() {
    let tmp = tempfile::tempdir().unwrap();
    let sock = tmp.path().join("tmux.sock");
    let mut pamd = Pamd::start(PamdOptions {
        config_toml: FAST_PAMD_TOML.to_string(),
        args: vec!["--local-worker".into()],
        worker_toml: Some(format!(
            "tmux_socket = {:?}\nheartbeat_seconds = 1\n",
            sock.display().to_string()
        )),
        tls_self_signed: true,
        ..PamdOptions::default()
    })
    .await
    .unwrap();
    let ca = pamd.data_dir.join("tls/ca.pem");
    assert_eq!(pamd.ca_file.as_ref(), Some(&ca));
    assert!(pamd.log().contains(&format!("--ca-file {}", ca.display())));
    let host = pam_controller::server::local_worker::host_name();
    wait_online(&pamd, &host).await;
    let before = std::fs::read(&ca).unwrap();
    pamd.restart().await.unwrap();
    assert_eq!(std::fs::read(&ca).unwrap(), before, "the CA is reused");
    let _ = std::process::Command::new("tmux")
        .arg("-S")
        .arg(&sock)
        .arg("kill-server")
        .status();
}
