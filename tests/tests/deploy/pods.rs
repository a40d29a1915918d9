//! The pod-level promises of the Kubernetes files and the Helm chart's
//! rendered output, checked on parsed YAML: the same checks for
//! both, so the chart cannot drift from deploy/kubernetes.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_yaml::Value;

/// The Deployments, StatefulSets and DaemonSets whose pod runs `bin`
/// (`args[0]` or `command[0]` of a container).
pub fn workloads<'a>(all: &'a [Value], bin: &str) -> Vec<&'a Value> {
    all.iter()
        .filter(|d| {
            ["Deployment", "StatefulSet", "DaemonSet"]
                .iter()
                .any(|k| d["kind"] == *k)
        })
        .filter(|d| container_running(pod(d), bin).is_some())
        .collect()
}

pub fn pod(workload: &Value) -> &Value {
    &workload["spec"]["template"]["spec"]
}

fn seq(v: &Value) -> &[Value] {
    v.as_sequence().map(Vec::as_slice).unwrap_or(&[])
}

fn all_containers(pod: &Value) -> impl Iterator<Item = &Value> {
    seq(&pod["initContainers"])
        .iter()
        .chain(seq(&pod["containers"]))
}

fn container_running<'a>(pod: &'a Value, bin: &str) -> Option<&'a Value> {
    seq(&pod["containers"])
        .iter()
        .find(|c| c["args"][0] == bin || c["command"][0] == bin)
}

/// The container's argv (command then args), as strings.
pub fn argv(c: &Value) -> Vec<String> {
    seq(&c["command"])
        .iter()
        .chain(seq(&c["args"]))
        .map(|a| a.as_str().expect("string arguments").to_string())
        .collect()
}

fn arg_after(c: &Value, flag: &str) -> Option<String> {
    let a = argv(c);
    a.iter().position(|x| x == flag).map(|i| a[i + 1].clone())
}

fn volume<'a>(pod: &'a Value, name: &str) -> &'a Value {
    seq(&pod["volumes"])
        .iter()
        .find(|v| v["name"] == name)
        .unwrap_or_else(|| panic!("no volume {name}"))
}

/// The volume and mount `path` is read through in container `c`: the mount
/// with the longest mountPath that is `path` or a directory above it.
fn mount_of<'a>(pod: &'a Value, c: &'a Value, path: &Path) -> Option<(&'a Value, &'a Value)> {
    seq(&c["volumeMounts"])
        .iter()
        .filter(|m| path.starts_with(m["mountPath"].as_str().unwrap()))
        .max_by_key(|m| m["mountPath"].as_str().unwrap().len())
        .map(|m| (volume(pod, m["name"].as_str().unwrap()), m))
}

/// Non-root, no privilege escalation, a read-only root file system, in
/// every container of the pod (init containers too).
fn check_locked_down(pod: &Value, what: &str) {
    let sc = &pod["securityContext"];
    assert_eq!(sc["runAsNonRoot"], true, "{what}: runAsNonRoot");
    assert!(
        sc["runAsUser"].as_u64().unwrap_or(0) > 0,
        "{what}: runAsUser"
    );
    for c in all_containers(pod) {
        let name = c["name"].as_str().unwrap_or("?");
        let sc = &c["securityContext"];
        assert_eq!(
            sc["readOnlyRootFilesystem"], true,
            "{what}: {name} readOnlyRootFilesystem"
        );
        assert_eq!(
            sc["allowPrivilegeEscalation"], false,
            "{what}: {name} allowPrivilegeEscalation"
        );
    }
}

/// Every Secret a pod can read: Secret volumes (projected ones too) and
/// `secretKeyRef`/`secretRef` in any container's environment.
fn secrets_read(pod: &Value) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for v in seq(&pod["volumes"]) {
        if let Some(s) = v["secret"]["secretName"].as_str() {
            out.insert(s.to_string());
        }
        for src in seq(&v["projected"]["sources"]) {
            if let Some(s) = src["secret"]["name"].as_str() {
                out.insert(s.to_string());
            }
        }
    }
    for c in all_containers(pod) {
        for e in seq(&c["env"]) {
            if let Some(s) = e["valueFrom"]["secretKeyRef"]["name"].as_str() {
                out.insert(s.to_string());
            }
        }
        for e in seq(&c["envFrom"]) {
            if let Some(s) = e["secretRef"]["name"].as_str() {
                out.insert(s.to_string());
            }
        }
    }
    out
}

/// A file pamd must find the same in every replica and after any restart
/// comes from a Secret mounted read-only: directly, or copied at pod start
/// by an init container from a read-only Secret mount into a memory
/// emptyDir (what pamd's 0600 rule on the key file needs). Returns the
/// Secret's name.
fn from_secret(pod: &Value, c: &Value, path: &Path, what: &str) -> String {
    let (vol, mount) = mount_of(pod, c, path)
        .unwrap_or_else(|| panic!("{what}: {} is on no volume", path.display()));
    assert_eq!(
        mount["readOnly"],
        true,
        "{what}: {} mounted read-write",
        path.display()
    );
    if let Some(s) = vol["secret"]["secretName"].as_str() {
        return s.to_string();
    }
    assert_eq!(
        vol["emptyDir"]["medium"],
        "Memory",
        "{what}: {} is neither a Secret nor a memory copy of one",
        path.display()
    );
    // The init container that fills it, from a read-only Secret mount.
    let vol_name = vol["name"].as_str().unwrap();
    let path_s = path.to_str().unwrap();
    let init = seq(&pod["initContainers"])
        .iter()
        .find(|i| {
            seq(&i["volumeMounts"])
                .iter()
                .any(|m| m["name"] == vol_name)
                && argv(i).iter().any(|a| a == path_s)
        })
        .unwrap_or_else(|| panic!("{what}: nothing fills {path_s}"));
    let args = argv(init);
    let src = seq(&init["volumeMounts"])
        .iter()
        .filter(|m| m["readOnly"] == true)
        .find_map(|m| {
            let v = volume(pod, m["name"].as_str().unwrap());
            let dir = m["mountPath"].as_str().unwrap();
            let copied = args.iter().any(|a| a.starts_with(&format!("{dir}/")));
            v["secret"]["secretName"]
                .as_str()
                .filter(|_| copied)
                .map(str::to_string)
        });
    src.unwrap_or_else(|| panic!("{what}: {path_s} is not copied from a read-only Secret"))
}

/// pamd's workload: replicas sharing one key Secret, the database URL
/// from a Secret, TLS from a Secret, durable things on no emptyDir, probes,
/// resources, a PDB. Returns the probe paths, for a real pamd to answer.
pub fn check_pamd_pods(all: &[Value], what: &str) -> Vec<String> {
    let w = workloads(all, "pamd");
    assert_eq!(w.len(), 1, "{what}: one pamd workload");
    let w = w[0];
    let replicas = w["spec"]["replicas"].as_u64().unwrap_or(1);
    assert!(replicas >= 2, "{what}: {replicas} pamd replicas");
    let pod = pod(w);
    check_locked_down(pod, what);
    let c = container_running(pod, "pamd").unwrap();

    // The config pamd runs with: the ConfigMap file at --config.
    let config = PathBuf::from(arg_after(c, "--config").expect("pamd --config"));
    let (vol, mount) = mount_of(pod, c, &config).expect("the config's volume");
    let cm_name = vol["configMap"]["name"]
        .as_str()
        .expect("config from a ConfigMap");
    let key = mount["subPath"]
        .as_str()
        .or_else(|| config.file_name().and_then(|f| f.to_str()))
        .unwrap();
    let cm = all
        .iter()
        .find(|d| d["kind"] == "ConfigMap" && d["metadata"]["name"] == cm_name)
        .expect("the ConfigMap");
    let cfg = super::pamd_accepts(cm["data"][key].as_str().unwrap(), what);

    // State in the external PostgreSQL: its URL from a Secret, never the
    // embedded cluster (which would live in the data dir).
    assert!(
        cfg.database_url.is_none(),
        "{what}: no URL in the ConfigMap"
    );
    let db = seq(&c["env"])
        .iter()
        .find(|e| e["name"] == "PAM_DATABASE_URL")
        .unwrap_or_else(|| panic!("{what}: no PAM_DATABASE_URL: the embedded PostgreSQL"));
    assert!(db["valueFrom"]["secretKeyRef"]["name"].is_string());

    // One key for every replica, from a read-only Secret, outside the
    // (scratch) data dir.
    assert!(
        !cfg.secrets_key_file.starts_with(&cfg.data_dir),
        "{what}: the secrets key in the data dir ({})",
        cfg.secrets_key_file.display()
    );
    from_secret(pod, c, &cfg.secrets_key_file, what);
    let pamd_config::Tls::Files {
        cert_file,
        key_file,
    } = &cfg.tls
    else {
        panic!("{what}: TLS from files (self-signed writes the data dir)")
    };
    for f in [cert_file, key_file] {
        from_secret(pod, c, f, what);
    }
    // One admin token for every replica, from a Secret ([api]
    // admin_token_file): none minted per pod into its scratch.
    let admin = cfg
        .api
        .admin_token_file
        .clone()
        .unwrap_or_else(|| panic!("{what}: no [api] admin_token_file: a token per pod"));
    from_secret(pod, c, &admin, what);
    // The data dir: scratch is fine (replica id, mirrors), nothing above
    // is in it.
    for f in [&cfg.secrets_key_file, cert_file, key_file, &admin] {
        assert!(!f.starts_with(&cfg.data_dir), "{what}: {}", f.display());
    }

    for p in ["readinessProbe", "livenessProbe"] {
        assert_eq!(c[p]["httpGet"]["scheme"], "HTTPS", "{what}: {p} scheme");
    }
    let probes: Vec<String> = ["readinessProbe", "livenessProbe"]
        .iter()
        .map(|p| {
            c[p]["httpGet"]["path"]
                .as_str()
                .unwrap_or_else(|| panic!("{what}: no {p}"))
                .to_string()
        })
        .collect();
    let r = &c["resources"];
    for (k, v) in [
        ("requests", "cpu"),
        ("requests", "memory"),
        ("limits", "memory"),
    ] {
        assert!(!r[k][v].is_null(), "{what}: resources.{k}.{v}");
    }

    // A PodDisruptionBudget over these pods that leaves one serving.
    let labels = w["spec"]["template"]["metadata"]["labels"]
        .as_mapping()
        .unwrap();
    let pdb = all
        .iter()
        .find(|d| {
            d["kind"] == "PodDisruptionBudget"
                && d["spec"]["selector"]["matchLabels"]
                    .as_mapping()
                    .is_some_and(|m| m.iter().all(|(k, v)| labels.get(k) == Some(v)))
        })
        .unwrap_or_else(|| panic!("{what}: no PodDisruptionBudget for pamd"));
    let min = pdb["spec"]["minAvailable"].as_u64().expect("minAvailable");
    assert!((1..replicas).contains(&min), "{what}: minAvailable {min}");
    probes
}

/// The worker's pod reads no Secret pamd's pod reads (database URL, key,
/// TLS pair), mounts no volume of pamd's, and has its own token from a
/// read-only Secret.
pub fn check_worker_pod(all: &[Value], what: &str) {
    let pamd = pod(workloads(all, "pamd")[0]);
    let w = workloads(all, "pam-worker");
    assert_eq!(w.len(), 1, "{what}: one worker workload");
    let wpod = pod(w[0]);
    check_locked_down(wpod, what);
    let c = container_running(wpod, "pam-worker").unwrap();
    let ours = secrets_read(wpod);
    let theirs = secrets_read(pamd);
    let shared: Vec<_> = ours.intersection(&theirs).collect();
    assert!(
        shared.is_empty(),
        "{what}: the worker reads pamd's {shared:?}"
    );
    let pvcs = |p: &Value| -> BTreeSet<String> {
        seq(&p["volumes"])
            .iter()
            .filter_map(|v| v["persistentVolumeClaim"]["claimName"].as_str())
            .map(str::to_string)
            .collect()
    };
    assert!(
        pvcs(wpod).is_disjoint(&pvcs(pamd)),
        "{what}: a shared volume"
    );
    let token = PathBuf::from(arg_after(c, "--token-file").expect("--token-file"));
    let s = from_secret(wpod, c, &token, what);
    assert!(!theirs.contains(&s));
    assert!(
        seq(&c["env"])
            .iter()
            .all(|e| e["name"] != "PAM_DATABASE_URL"),
        "{what}: the worker has the database URL"
    );
}

use pam_controller::config as pamd_config;
