//! The deploy files (deploy/) checked as far as this machine can:
//! systemd units with `systemd-analyze verify` when it exists, the
//! Kubernetes and compose YAML parse with the expected keys, pamd.toml
//! (the file and the ConfigMap's copy) is a config pamd accepts, the plist
//! is well-formed XML, and the Dockerfile names paths and binaries that
//! exist. No docker engine here: the image itself is not built.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde::Deserialize;
use serde_yaml::Value;

mod pods;

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
    let text = read("deploy/kubernetes/pamd.yaml");
    assert!(
        !text.contains("future") && !text.contains("part 2"),
        "pamd.yaml still calls leader election future work"
    );
}

/// The Kubernetes files keep the promises of docs/operations.md
/// ("Running replicas", "Secrets") with 2 replicas: one shared key from a
/// read-only Secret, nothing durable in an emptyDir, non-root on a
/// read-only root, a PodDisruptionBudget, and a worker holding nothing of
/// pamd's.
#[test]
fn kubernetes_replicas_share_one_key_and_keep_no_state() {
    let mut all = docs("deploy/kubernetes/pamd.yaml");
    all.extend(docs("deploy/kubernetes/worker.yaml"));
    pods::check_pamd_pods(&all, "deploy/kubernetes");
    pods::check_worker_pod(&all, "deploy/kubernetes");
}

/// The body limit the deploy config gives apply fits the memory
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
    // The chart's defaults.
    let values = &docs("deploy/helm/pam/values.yaml")[0];
    let helm = values["resources"]["limits"]["memory"].as_str().unwrap();
    let helm: usize = helm.strip_suffix("Mi").unwrap().parse::<usize>().unwrap() << 20;
    let body = values["config"]["maxBodyBytes"].as_u64().unwrap() as usize;
    assert!(
        body * RSS_PER_BODY_BYTE + IDLE <= helm,
        "values.yaml: config.maxBodyBytes {body} does not fit resources.limits.memory"
    );
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

/// A compose service's volumes as (volume, mount path, read-only).
fn compose_volumes(svc: &Value) -> Vec<(String, String, bool)> {
    svc["volumes"]
        .as_sequence()
        .map(Vec::as_slice)
        .unwrap_or(&[])
        .iter()
        .map(|v| {
            let parts: Vec<&str> = v.as_str().unwrap().split(':').collect();
            (
                parts[0].to_string(),
                parts[1].to_string(),
                parts.get(2) == Some(&"ro"),
            )
        })
        .collect()
}

/// In compose the worker mounts nothing of pamd's (its data
/// volume holds admin.token, secrets.key and the TLS key): only its own
/// token volume, read-only, which the worker-token service fills, and its
/// own data volume.
#[test]
fn compose_gives_the_worker_only_its_own_token() {
    let s = &docs("deploy/compose.yaml")[0]["services"];
    let pamd: Vec<String> = compose_volumes(&s["pamd"])
        .into_iter()
        .map(|v| v.0)
        .collect();
    let worker = compose_volumes(&s["worker"]);
    for (vol, _, _) in &worker {
        assert!(!pamd.contains(vol), "the worker mounts pamd's {vol}");
    }
    assert!(s["worker"]["secrets"].is_null() && s["worker"]["environment"].is_null());
    let argv = pods::argv(&s["worker"]);
    for flag in ["--token-file", "--ca-file"] {
        let i = argv.iter().position(|a| a == flag).unwrap();
        let path = Path::new(&argv[i + 1]);
        let (vol, _, ro) = worker
            .iter()
            .find(|(_, at, _)| path.starts_with(at))
            .unwrap_or_else(|| panic!("{flag} {} on no volume", path.display()));
        assert!(ro, "{flag}: {vol} mounted read-write");
        // Filled by the worker-token service, the only other user.
        let filler = compose_volumes(&s["worker-token"]);
        assert!(filler.iter().any(|(v, _, ro)| v == vol && !ro), "{vol}");
    }
    assert_eq!(
        s["worker"]["depends_on"]["worker-token"]["condition"],
        "service_completed_successfully"
    );
}

/// Compose's worker-token step really works. Its script (as
/// compose runs it: `$$` is `$`) runs against a real pamd serving
/// --tls-self-signed: it waits for pamd, makes a worker token with pamd's
/// admin token and copies pamd's CA; a second run keeps the token; and a
/// worker with only that token and CA registers and goes online.
#[tokio::test]
async fn compose_worker_token_step_makes_a_token_a_worker_registers_with() {
    let svc = docs("deploy/compose.yaml")[0]["services"]["worker-token"].clone();
    let argv = pods::argv(&svc);
    assert_eq!(&argv[..2], ["sh", "-euc"]);
    let script = argv[2].replace("$$", "$");
    let pamd = pam_tests::Pamd::start(pam_tests::PamdOptions {
        tls_self_signed: true,
        ..Default::default()
    })
    .await
    .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let token_dir = tmp.path().join("worker-token");
    std::fs::create_dir(&token_dir).unwrap();
    let bin_dir = pam_tests::bin("pamctl").parent().unwrap().to_path_buf();
    let env = &svc["environment"];
    let run = || {
        let mut cmd = Command::new("sh");
        cmd.args(["-euc", &script])
            .env_clear()
            .env(
                "PATH",
                format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap()),
            )
            .env("HOME", tmp.path())
            .env("PAMD_DATA", &pamd.data_dir)
            .env("TOKEN_DIR", &token_dir)
            .env("PAM_SERVER", &pamd.url)
            .env("WORKER_NAME", env["WORKER_NAME"].as_str().unwrap());
        for k in ["PAMD_DATA", "TOKEN_DIR", "PAM_SERVER", "WORKER_NAME"] {
            assert!(env[k].is_string(), "compose sets {k}");
        }
        cmd.output().unwrap()
    };
    let out = run();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let token = std::fs::read_to_string(token_dir.join("token")).unwrap();
    assert!(token.trim().starts_with("pamw_"), "a worker token");
    assert_eq!(
        std::fs::read(token_dir.join("ca.pem")).unwrap(),
        std::fs::read(pamd.data_dir.join("tls/ca.pem")).unwrap()
    );
    let out = run();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(token_dir.join("token")).unwrap(),
        token
    );
    let name = env["WORKER_NAME"].as_str().unwrap();
    let toml = format!(
        "{}\nca_file = {:?}\n",
        pam_tests::worker::FAST_WORKER_TOML,
        token_dir.join("ca.pem").display().to_string()
    );
    let _w =
        pam_tests::worker::Worker::start_with_token(&pamd.url, token.trim(), name, &toml).unwrap();
    pam_tests::eventually(Duration::from_secs(30), "worker1 online", || async {
        let h = pamd.get(&format!("/api/v1/hosts/{name}")).await.ok()?;
        (h["status"]["phase"] == "online").then_some(())
    })
    .await;
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

/// One `FROM … AS name` stage of the Dockerfile and its lines.
struct Stage {
    name: String,
    base: String,
    lines: Vec<String>,
}

fn stages(text: &str) -> Vec<Stage> {
    let mut out: Vec<Stage> = Vec::new();
    // Continuation lines joined: one instruction per line.
    let joined = text.replace("\\\n", " ");
    for line in joined.lines().map(str::trim) {
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        if let Some(from) = line.strip_prefix("FROM ") {
            let parts: Vec<&str> = from.split_whitespace().collect();
            let name = match parts.as_slice() {
                [_, as_, n] if as_.eq_ignore_ascii_case("as") => n.to_string(),
                _ => format!("stage{}", out.len()),
            };
            out.push(Stage {
                name,
                base: parts[0].to_string(),
                lines: Vec::new(),
            });
        } else {
            out.last_mut()
                .expect("an instruction before FROM")
                .lines
                .push(line.to_string());
        }
    }
    out
}

/// A stage's lines with those of the stages it is built on, base first.
fn chain<'a>(all: &'a [Stage], name: &str) -> Vec<&'a str> {
    let s = all.iter().find(|s| s.name == name).unwrap();
    let mut lines = if all.iter().any(|b| b.name == s.base) {
        chain(all, &s.base)
    } else {
        Vec::new()
    };
    lines.extend(s.lines.iter().map(String::as_str));
    lines
}

/// The packages a stage (with its bases) installs with apt-get, and the
/// user it ends as.
fn apt_and_user(all: &[Stage], name: &str) -> (Vec<String>, String) {
    let mut pkgs = Vec::new();
    let mut user = "root".to_string();
    for l in chain(all, name) {
        for cmd in l.split("&&") {
            if let Some(rest) = cmd.trim().strip_prefix("apt-get install") {
                pkgs.extend(
                    rest.split_whitespace()
                        .filter(|w| !w.starts_with('-'))
                        .map(str::to_string),
                );
            }
        }
        if let Some(u) = l.strip_prefix("USER ") {
            user = u.trim().to_string();
        }
    }
    (pkgs, user)
}

#[test]
fn dockerfile_copies_what_exists_and_ships_the_three_binaries() {
    let text = read("deploy/Dockerfile");
    let all = stages(&text);
    let bins = ["pamd", "pam-worker", "pamctl"];
    let mut shipped = Vec::new();
    for st in &all {
        for line in &st.lines {
            if let Some(args) = line.strip_prefix("COPY ") {
                let parts: Vec<&str> = args.split_whitespace().collect();
                if let Some(from) = parts[0].strip_prefix("--from=") {
                    if from != "build" {
                        // Another image (node for the agent CLIs).
                        assert!(!all.iter().any(|s| s.name == from), "{line}");
                        continue;
                    }
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
    }
    shipped.sort();
    shipped.dedup();
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
}

/// pamd's image has git (it fetches git Sources with it), the
/// worker's git and tmux, a stage adds the agent CLIs from npm, and every
/// image runs as the non-root user `pam`.
#[test]
fn dockerfile_images_have_git_and_run_as_pam() {
    let all = stages(&read("deploy/Dockerfile"));
    let ships = |bin: &str| -> Vec<&Stage> {
        all.iter()
            .filter(|s| {
                s.lines
                    .iter()
                    .any(|l| l.starts_with("COPY --from=build") && l.contains(&format!("/{bin} ")))
            })
            .collect()
    };
    let pamd = ships("pamd");
    assert_eq!(pamd.len(), 1, "one pamd image");
    assert_eq!(
        all.last().unwrap().name,
        pamd[0].name,
        "pamd is the default target"
    );
    let (pkgs, user) = apt_and_user(&all, &pamd[0].name);
    assert!(
        pkgs.iter().any(|p| p == "git"),
        "pamd image without git: {pkgs:?}"
    );
    assert!(
        pkgs.iter().any(|p| p == "ca-certificates"),
        "git over https: {pkgs:?}"
    );
    assert_eq!(user, "pam", "pamd runs as");
    let worker = ships("pam-worker");
    assert_eq!(worker.len(), 1, "one worker image");
    let (pkgs, user) = apt_and_user(&all, &worker[0].name);
    for p in ["git", "tmux"] {
        assert!(pkgs.iter().any(|x| x == p), "worker image without {p}");
    }
    assert_eq!(user, "pam", "the worker runs as");
    // The agents' stage: built on the worker, the three npm packages.
    let agents = all
        .iter()
        .find(|s| {
            chain(&all, &s.name)
                .iter()
                .any(|l| l.starts_with("ARG AGENT_CLIS="))
        })
        .expect("a stage with ARG AGENT_CLIS");
    assert_eq!(agents.base, worker[0].name);
    let lines = chain(&all, &agents.name);
    let arg = lines
        .iter()
        .find(|l| l.starts_with("ARG AGENT_CLIS="))
        .unwrap();
    for p in [
        "@anthropic-ai/claude-code",
        "@openai/codex",
        "@google/gemini-cli",
    ] {
        assert!(arg.contains(p), "{arg} lacks {p}");
    }
    assert!(lines
        .iter()
        .any(|l| l.contains("npm install -g") && l.contains("$AGENT_CLIS")));
    assert_eq!(apt_and_user(&all, &agents.name).1, "pam");
    // compose builds stages that exist.
    let compose = &docs("deploy/compose.yaml")[0]["services"];
    for svc in ["pamd", "worker"] {
        let t = compose[svc]["build"]["target"].as_str().unwrap();
        assert!(all.iter().any(|s| s.name == t), "{svc}: no stage {t}");
    }
}

/// The arguments the images, compose and Kubernetes start pamd and
/// pam-worker with are flags the binaries take (`--help` after them
/// answers 0 only when every flag before it parsed).
#[test]
fn entrypoint_arguments_are_flags_the_binaries_take() {
    let mut argvs: Vec<(String, Vec<String>)> = Vec::new();
    for st in stages(&read("deploy/Dockerfile")) {
        for l in &st.lines {
            if let Some(cmd) = l.strip_prefix("CMD ") {
                let v: Vec<String> = serde_json::from_str(cmd).unwrap();
                argvs.push((format!("Dockerfile {}", st.name), v));
            }
        }
    }
    let compose = &docs("deploy/compose.yaml")[0]["services"];
    for svc in ["pamd", "worker"] {
        argvs.push((format!("compose {svc}"), pods::argv(&compose[svc])));
    }
    let mut k8s = docs("deploy/kubernetes/pamd.yaml");
    k8s.extend(docs("deploy/kubernetes/worker.yaml"));
    for bin in ["pamd", "pam-worker"] {
        for w in pods::workloads(&k8s, bin) {
            for c in pods::pod(w)["containers"].as_sequence().unwrap() {
                argvs.push((format!("kubernetes {bin}"), pods::argv(c)));
            }
        }
    }
    assert!(argvs.len() >= 6, "{argvs:?}");
    for (what, argv) in argvs {
        let out = Command::new(pam_tests::bin(&argv[0]))
            .args(&argv[1..])
            .arg("--help")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{what}: {argv:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// The probe paths of deploy/kubernetes and of the chart are
/// routes a real pamd answers 200 on (a typo would leave every pod
/// unready or restarting).
#[tokio::test]
async fn probe_paths_are_routes_pamd_answers() {
    let mut all = docs("deploy/kubernetes/pamd.yaml");
    all.extend(docs("deploy/kubernetes/worker.yaml"));
    let mut paths = pods::check_pamd_pods(&all, "deploy/kubernetes");
    // The chart's, read from the template text (no helm to render it).
    let chart = read("deploy/helm/pam/templates/deployment.yaml");
    let chart_paths: Vec<String> = chart
        .lines()
        .filter_map(|l| l.split_once("httpGet: {path: "))
        .map(|(_, rest)| rest.split(',').next().unwrap().to_string())
        .collect();
    assert_eq!(chart_paths, paths, "the chart probes as deploy/kubernetes");
    paths.extend(chart_paths);
    let pamd = pam_tests::Pamd::start(Default::default()).await.unwrap();
    for p in paths {
        let r = reqwest::get(format!("{}{p}", pamd.url)).await.unwrap();
        assert_eq!(r.status(), 200, "GET {p}");
    }
}

/// The command deploy/kubernetes/pamd.yaml gives for making the secrets
/// key makes a file pamd reads, and the placeholder shipped in the Secret
/// is one pamd refuses (a pod never runs on it).
#[test]
fn the_documented_secrets_key_command_makes_a_key_pamd_reads() {
    use pam_controller::rules::secrets::keyring::Keyring;
    let text = read("deploy/kubernetes/pamd.yaml");
    let start = text.find("#   printf").expect("the key command");
    let end = start + text[start..].find("> secrets.key").unwrap() + "> secrets.key".len();
    let cmd: String = text[start..end]
        .lines()
        .map(|l| l.trim_start_matches('#').trim())
        .collect::<Vec<_>>()
        .join("\n");
    let tmp = tempfile::tempdir().unwrap();
    let out = Command::new("sh")
        .args(["-c", &cmd])
        .current_dir(tmp.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{cmd}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let key = tmp.path().join("secrets.key");
    let ring = Keyring::load_or_create(&key).unwrap_or_else(|e| panic!("{cmd}: {e:#}"));
    assert_eq!(ring.ids().len(), 1);
    let all = docs("deploy/kubernetes/pamd.yaml");
    let placeholder = all
        .iter()
        .find(|d| d["metadata"]["name"] == "pamd-secrets-key")
        .unwrap()["stringData"]["secrets.key"]
        .as_str()
        .unwrap();
    std::fs::write(&key, placeholder).unwrap();
    assert!(
        Keyring::load_or_create(&key).is_err(),
        "the placeholder loads"
    );
}

/// Every `.Values.a.b` a template of `chart` reads that values.yaml lacks.
fn missing_values(template: &str, values: &Value) -> Vec<String> {
    let mut missing = Vec::new();
    for (i, _) in template.match_indices(".Values.") {
        let path: String = template[i + ".Values.".len()..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '.')
            .collect();
        let mut v = values;
        for part in path.trim_end_matches('.').split('.') {
            v = &v[part];
        }
        if v.is_null() {
            missing.push(format!(".Values.{path}"));
        }
    }
    missing
}

/// The Helm chart. Chart.yaml and values.yaml parse, every value
/// a template reads is in values.yaml, the defaults run 2 replicas with a
/// body limit that fits the memory limit; with `helm` on PATH, `helm lint`
/// passes and `helm template` renders pods that pass the same checks as
/// deploy/kubernetes.
#[test]
fn helm_chart_values_and_templates_agree() {
    let chart = &docs("deploy/helm/pam/Chart.yaml")[0];
    assert_eq!(chart["apiVersion"], "v2");
    assert_eq!(chart["name"], "pam");
    let values = &docs("deploy/helm/pam/values.yaml")[0];
    assert!(values["replicas"].as_u64().unwrap() >= 2);
    let dir = root().join("deploy/helm/pam/templates");
    let mut templates = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let path = e.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let missing = missing_values(&text, values);
        assert!(missing.is_empty(), "{}: {missing:?}", path.display());
        templates += 1;
    }
    assert!(templates >= 7, "{templates} templates");
    // The checker sees a value that is not there.
    assert_eq!(
        missing_values("{{ .Values.worker.nope }} {{ .Values.replicas }}", values),
        [".Values.worker.nope"]
    );
    if Command::new("helm").arg("version").output().is_err() {
        println!(
            "note: helm is not installed: the chart was not linted or rendered \
             (only its values were checked)"
        );
        return;
    }
    let chart_dir = root().join("deploy/helm/pam");
    let out = Command::new("helm")
        .arg("lint")
        .arg(&chart_dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "helm lint: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    let out = Command::new("helm")
        .args(["template", "pam"])
        .arg(&chart_dir)
        .args([
            "--set",
            "worker.enabled=true,serviceMonitor.enabled=true,ingress.enabled=true,\
             tls.certManager.enabled=true,tls.certManager.issuerRef.name=ca",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "helm template: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let rendered: Vec<Value> = serde_yaml::Deserializer::from_str(&text)
        .map(|d| Value::deserialize(d).unwrap())
        .filter(|v| !v.is_null())
        .collect();
    pods::check_pamd_pods(&rendered, "helm template");
    pods::check_worker_pod(&rendered, "helm template");
}

/// The schema check: the Kubernetes manifests validate against the
/// Kubernetes API's own schemas (strict: an unknown field fails) with
/// `kubernetes-validate` (pip package `kubernetes-validate`; kubeconform is
/// not in the package registries), when it is on PATH. A manifest with a
/// field of the wrong type is refused first, so the check is known to bite.
#[test]
fn kubernetes_manifests_pass_the_schema_check() {
    let tool = "kubernetes-validate";
    if Command::new(tool).arg("--version").output().is_err() {
        println!(
            "note: {tool} is not installed (pip install kubernetes-validate): \
             deploy/kubernetes was not checked against the Kubernetes schemas"
        );
        return;
    }
    let validate = |files: &[PathBuf]| {
        Command::new(tool)
            .args(["--strict", "--quiet"])
            .args(files)
            .output()
            .unwrap()
    };
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\n\
         spec:\n  replicas: two\n  selector: {matchLabels: {app: x}}\n\
         \x20 template:\n    metadata: {labels: {app: x}}\n\
         \x20   spec: {containers: [{name: x, image: x}]}\n",
    )
    .unwrap();
    let out = validate(&[bad]);
    assert!(
        !out.status.success(),
        "{tool} accepted replicas: two: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    let files = [
        "deploy/kubernetes/pamd.yaml",
        "deploy/kubernetes/worker.yaml",
    ]
    .map(|f| root().join(f));
    let out = validate(&files);
    assert!(
        out.status.success(),
        "{tool}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
