//! Issue 15: the deploy files (deploy/) checked as far as this machine can:
//! systemd units with `systemd-analyze verify` when it exists, the
//! Kubernetes and compose YAML parse with the expected keys, pamd.toml
//! (the file and the ConfigMap's copy) is a config pamd accepts, the plist
//! is well-formed XML, and the Dockerfile names paths and binaries that
//! exist. No docker engine here: the image itself is not built.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Deserialize;
use serde_yaml::Value;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn docs(rel: &str) -> Vec<Value> {
    let text = read(rel);
    serde_yaml::Deserializer::from_str(&text)
        .map(|d| Value::deserialize(d).unwrap_or_else(|e| panic!("{rel}: {e}")))
        .collect()
}

fn pamd_accepts(toml: &str, what: &str) -> pam_controller::config::Config {
    let cli = pam_controller::config::Cli::default();
    let c = pam_controller::config::Config::resolve(
        Some((Path::new(what), toml)),
        &cli,
        Some(Path::new("/home/pam")),
    )
    .unwrap_or_else(|e| panic!("{what}: {e:#}"));
    assert!(
        matches!(c.tls, pam_controller::config::Tls::Files { .. }),
        "{what}: TLS on"
    );
    c
}

#[test]
fn systemd_units_verify() {
    let units = ["pamd.service", "pam-worker.service"];
    for u in units {
        let text = read(&format!("deploy/systemd/{u}"));
        for key in [
            "NoNewPrivileges=yes",
            "ProtectSystem=strict",
            "ProtectHome=yes",
            "PrivateTmp=yes",
            "ReadWritePaths=",
            "User=pam",
            "Restart=on-failure",
        ] {
            assert!(text.contains(key), "{u} lacks {key}");
        }
    }
    if Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_err()
    {
        println!("note: systemd-analyze is not installed; the units were not verified");
        return;
    }
    // verify checks that ExecStart's program exists: point it at the
    // binaries this test run built.
    let tmp = tempfile::tempdir().unwrap();
    let bin_dir = pam_tests::bin("pamd").parent().unwrap().to_path_buf();
    let mut paths = Vec::new();
    for u in units {
        let text = read(&format!("deploy/systemd/{u}"))
            .replace("/usr/local/bin/", &format!("{}/", bin_dir.display()));
        let p = tmp.path().join(u);
        std::fs::write(&p, text).unwrap();
        paths.push(p);
    }
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .args(&paths)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "systemd-analyze verify: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn kubernetes_manifests_have_what_a_deployment_needs() {
    let all = docs("deploy/kubernetes/pamd.yaml");
    let kind = |k: &str| -> Vec<&Value> { all.iter().filter(|d| d["kind"] == k).collect() };
    let dep = kind("Deployment")[0];
    let replicas = dep["spec"]["replicas"].as_u64().unwrap();
    assert!((2..=3).contains(&replicas), "replicas {replicas}");
    let c = &dep["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/readyz");
    assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(c["readinessProbe"]["httpGet"]["scheme"], "HTTPS");
    assert_eq!(c["env"][0]["name"], "PAM_DATABASE_URL");
    assert!(c["env"][0]["valueFrom"]["secretKeyRef"]["name"].is_string());
    assert_eq!(
        dep["spec"]["template"]["spec"]["securityContext"]["runAsNonRoot"],
        true
    );
    assert_eq!(kind("Service").len(), 1);
    let secrets = kind("Secret");
    assert!(secrets
        .iter()
        .any(|s| s["stringData"]["database-url"].is_string()));
    assert!(secrets.iter().any(|s| s["type"] == "kubernetes.io/tls"));
    let cm = kind("ConfigMap")[0];
    pamd_accepts(
        cm["data"]["pamd.toml"].as_str().unwrap(),
        "ConfigMap pamd.toml",
    );
    pamd_accepts(&read("deploy/pamd.toml"), "deploy/pamd.toml");
}

/// Issue 30: the body limit the deploy config gives apply fits the memory
/// the deploy files give pamd. An apply peaks at up to 10 bytes of RSS per
/// byte of body over pamd's idle ~20 MiB (bench-apply-memory, small
/// documents; docs/operations.md, "Memory").
#[test]
fn the_apply_body_limit_fits_the_memory_limit() {
    const RSS_PER_BODY_BYTE: usize = 10;
    const IDLE: usize = 32 << 20;
    let all = docs("deploy/kubernetes/pamd.yaml");
    let dep = all.iter().find(|d| d["kind"] == "Deployment").unwrap();
    let c = &dep["spec"]["template"]["spec"]["containers"][0];
    let k8s = c["resources"]["limits"]["memory"].as_str().unwrap();
    let k8s: usize = k8s.strip_suffix("Mi").unwrap().parse::<usize>().unwrap() << 20;
    let compose = &docs("deploy/compose.yaml")[0]["services"]["pamd"]["mem_limit"];
    let compose = compose.as_str().unwrap();
    let compose: usize = compose.strip_suffix('m').unwrap().parse::<usize>().unwrap() << 20;
    let cm = all.iter().find(|d| d["kind"] == "ConfigMap").unwrap();
    for (what, toml, limit) in [
        (
            "ConfigMap pamd.toml",
            cm["data"]["pamd.toml"].as_str().unwrap().to_string(),
            k8s,
        ),
        ("deploy/pamd.toml", read("deploy/pamd.toml"), compose),
    ] {
        let body = pamd_accepts(&toml, what).api.max_body_bytes;
        assert!(
            body * RSS_PER_BODY_BYTE + IDLE <= limit,
            "{what}: [api] max_body_bytes {body} needs {} MiB, the memory limit is {} MiB",
            (body * RSS_PER_BODY_BYTE + IDLE) >> 20,
            limit >> 20
        );
    }
    // The default, too (a config without [api]).
    let default = pam_controller::api::routes::DEFAULT_MAX_BODY_BYTES;
    assert!(default * RSS_PER_BODY_BYTE + IDLE <= k8s.min(compose));
}

#[test]
fn compose_has_pamd_postgres_and_a_worker() {
    let d = &docs("deploy/compose.yaml")[0];
    let s = &d["services"];
    assert!(s["postgres"]["image"]
        .as_str()
        .unwrap()
        .starts_with("postgres"));
    assert_eq!(s["pamd"]["build"]["dockerfile"], "deploy/Dockerfile");
    assert!(s["pamd"]["environment"]["PAM_DATABASE_URL"].is_string());
    let worker = s["worker"]["command"].as_sequence().unwrap();
    assert_eq!(worker[0], "pam-worker");
    assert!(worker.iter().any(|a| a == "--ca-file"));
}

#[test]
fn launchd_plist_is_well_formed() {
    let text = read("deploy/launchd/dev.pam.worker.plist");
    well_formed(&text).unwrap_or_else(|e| panic!("plist: {e}"));
    assert!(text.contains("<string>/usr/local/bin/pam-worker</string>"));
    // The checker itself refuses broken XML.
    assert!(well_formed("<a><b></a></b>").is_err());
    assert!(well_formed("<a>").is_err());
}

/// Tags nest and close, attributes are quoted; the prolog, comments and
/// the DOCTYPE are skipped. Enough for a plist (no CDATA, no entities
/// besides the five predefined).
fn well_formed(text: &str) -> Result<(), String> {
    let mut stack: Vec<String> = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find('<') {
        let between = &rest[..i];
        if between.contains('>') {
            return Err(format!("stray '>' before {:?}", &rest[i..].lines().next()));
        }
        rest = &rest[i..];
        let end_marker = if rest.starts_with("<!--") { "-->" } else { ">" };
        let end = rest.find(end_marker).ok_or("unclosed tag")? + end_marker.len();
        let tag = &rest[..end];
        rest = &rest[end..];
        if tag.starts_with("<?") || tag.starts_with("<!") {
            continue;
        }
        let inner = tag.trim_start_matches('<').trim_end_matches('>');
        if let Some(name) = inner.strip_prefix('/') {
            match stack.pop() {
                Some(open) if open == name.trim() => {}
                other => return Err(format!("</{name}> closes {other:?}")),
            }
            continue;
        }
        let self_closing = inner.ends_with('/');
        let inner = inner.trim_end_matches('/');
        let name = inner.split_whitespace().next().ok_or("empty tag")?;
        if !inner.matches('"').count().is_multiple_of(2) {
            return Err(format!("unbalanced quotes in {tag}"));
        }
        if !self_closing {
            stack.push(name.to_string());
        }
    }
    if rest.contains('>') {
        return Err("stray '>' at the end".into());
    }
    match stack.last() {
        None => Ok(()),
        Some(open) => Err(format!("<{open}> never closed")),
    }
}

#[test]
fn dockerfile_copies_what_exists_and_ships_the_three_binaries() {
    let text = read("deploy/Dockerfile");
    let bins = ["pamd", "pam-worker", "pamctl"];
    let mut shipped = Vec::new();
    let mut froms = 0;
    for line in text.lines().map(str::trim) {
        if line.starts_with("FROM ") {
            froms += 1;
        }
        if let Some(args) = line.strip_prefix("COPY ") {
            let parts: Vec<&str> = args.split_whitespace().collect();
            if parts[0].starts_with("--from=") {
                let src = parts[1];
                let name = src.rsplit('/').next().unwrap();
                assert!(src.starts_with("/src/target/release/"), "{line}");
                assert!(bins.contains(&name), "{line}: not one of {bins:?}");
                shipped.push(name.to_string());
            } else {
                // From the build context (the workspace root).
                for src in &parts[..parts.len() - 1] {
                    assert!(root().join(src).exists(), "{line}: {src} does not exist");
                }
            }
        }
        if line.starts_with("RUN cargo build") {
            for pkg in line.split(" -p ").skip(1) {
                let pkg = pkg.split_whitespace().next().unwrap();
                let dir = match pkg {
                    "pam-controller" => "controller",
                    "pam-worker" => "worker",
                    other => other,
                };
                let manifest = read(&format!("{dir}/Cargo.toml"));
                assert!(manifest.contains(&format!("name = \"{pkg}\"")), "{pkg}");
            }
        }
    }
    assert_eq!(froms, 2, "multi-stage: build and final");
    shipped.sort();
    assert_eq!(shipped, ["pam-worker", "pamctl", "pamd"]);
    // Every workspace member is copied into the build stage.
    let members = read("Cargo.toml");
    let members = members
        .lines()
        .find(|l| l.starts_with("members"))
        .unwrap()
        .to_string();
    for m in members.split('"').skip(1).step_by(2) {
        assert!(
            text.contains(&format!("COPY {m} {m}")),
            "member {m} not copied"
        );
    }
    assert!(text.contains("USER pam"), "non-root");
}
