//! Where pamctl sends requests, with which token, for which project.
//!
//! Each setting is taken from the first of:
//!
//! 1. the flag (`--server`, `--token`, `-p/--project`, `--ca-file`),
//! 2. the environment (`PAM_SERVER`, `PAM_TOKEN`, `PAM_PROJECT`,
//!    `PAM_CA_FILE`),
//! 3. the selected context of the config file (`--context NAME`, else its
//!    `current-context`),
//! 4. the local defaults: `http://127.0.0.1:7700`, and the token pamd
//!    writes to `<data dir>/admin.token` (data dir: `PAM_DATA_DIR`, else
//!    `~/.local/share/pam`).
//!
//! The config file is `PAM_CONFIG`, else `$XDG_CONFIG_HOME/pam/config.yaml`,
//! else `~/.config/pam/config.yaml`:
//!
//! ```yaml
//! current-context: prod
//! contexts:
//!   - name: prod
//!     server: https://pam.example.com
//!     token-file: ~/.secrets/pam-prod   # or token: pam_…
//!     project: web
//!     ca-file: ~/.config/pam/prod-ca.pem  # trust only this CA (https://)
//! ```
//!
//! Without a CA file an https:// server must chain to the bundled public
//! roots (webpki-roots).
//!
//! # Caveats
//!
//! The `admin.token` fallback is used only when the server is on this
//! machine (a loopback address): the local admin token is never sent to a
//! remote server just because nothing else was configured.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{CliError, Result};

pub const DEFAULT_SERVER: &str = "http://127.0.0.1:7700";

/// What the process was started with, gathered once so resolution is a
/// pure function (tests build this by hand).
#[derive(Debug, Clone, Default)]
pub struct Inputs {
    pub flag_server: Option<String>,
    pub flag_token: Option<String>,
    pub flag_context: Option<String>,
    pub flag_project: Option<String>,
    pub flag_ca_file: Option<PathBuf>,
    pub env_server: Option<String>,
    pub env_token: Option<String>,
    pub env_project: Option<String>,
    pub env_ca_file: Option<PathBuf>,
    pub env_config: Option<PathBuf>,
    pub env_data_dir: Option<PathBuf>,
    pub xdg_config_home: Option<PathBuf>,
    pub home: Option<PathBuf>,
}

impl Inputs {
    /// The environment part of the inputs, from the process environment.
    /// Empty variables count as unset.
    pub fn from_env() -> Inputs {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        Inputs {
            env_server: var("PAM_SERVER"),
            env_token: var("PAM_TOKEN"),
            env_project: var("PAM_PROJECT"),
            env_ca_file: var("PAM_CA_FILE").map(PathBuf::from),
            env_config: var("PAM_CONFIG").map(PathBuf::from),
            env_data_dir: var("PAM_DATA_DIR").map(PathBuf::from),
            xdg_config_home: var("XDG_CONFIG_HOME").map(PathBuf::from),
            home: var("HOME").map(PathBuf::from),
            ..Inputs::default()
        }
    }
}

/// Where a setting came from; shown in hints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Flag,
    Env,
    Context(String),
    Default,
}

/// Where the token came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenSource {
    Flag,
    Env,
    Context(String),
    /// `<data dir>/admin.token`.
    AdminFile(PathBuf),
    None,
}

/// The resolved connection settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub server: String,
    pub server_source: Source,
    pub token: Option<String>,
    pub token_source: TokenSource,
    pub project: Option<String>,
    /// The CA file an https:// server must chain to; `None`: public roots.
    pub ca_file: Option<PathBuf>,
    pub data_dir: PathBuf,
    /// The config file consulted (whether or not it exists).
    pub config_path: Option<PathBuf>,
}

/// `~/.config/pam/config.yaml`.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct ConfigFile {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_context: Option<String>,
    #[serde(default)]
    pub contexts: Vec<Context>,
}

/// One named context.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Context {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_file: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<PathBuf>,
}

fn expand_tilde(path: &Path, home: Option<&Path>) -> PathBuf {
    match (path.strip_prefix("~"), home) {
        (Ok(rest), Some(home)) => home.join(rest),
        _ => path.to_path_buf(),
    }
}

/// The config file path: `PAM_CONFIG`, `$XDG_CONFIG_HOME/pam/config.yaml`,
/// `~/.config/pam/config.yaml`.
pub fn config_path(inputs: &Inputs) -> Option<PathBuf> {
    if let Some(p) = &inputs.env_config {
        return Some(expand_tilde(p, inputs.home.as_deref()));
    }
    if let Some(x) = &inputs.xdg_config_home {
        return Some(x.join("pam/config.yaml"));
    }
    inputs
        .home
        .as_ref()
        .map(|h| h.join(".config/pam/config.yaml"))
}

/// The default data dir: `PAM_DATA_DIR`, else `~/.local/share/pam`
/// (pamd's default).
pub fn data_dir(inputs: &Inputs) -> PathBuf {
    if let Some(d) = &inputs.env_data_dir {
        return expand_tilde(d, inputs.home.as_deref());
    }
    match &inputs.home {
        Some(h) => h.join(".local/share/pam"),
        None => PathBuf::from(".local/share/pam"),
    }
}

fn load_config(path: &Path, explicit: bool) -> Result<Option<ConfigFile>> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !explicit => return Ok(None),
        Err(e) => {
            return Err(CliError::usage(format!(
                "cannot read config file {}: {e}",
                path.display()
            )))
        }
    };
    if text.trim().is_empty() {
        return Ok(Some(ConfigFile::default()));
    }
    serde_yaml::from_str(&text).map(Some).map_err(|e| {
        let mut err = CliError::usage(format!("config file {}: {e}", path.display()))
            .hint("expected `current-context: NAME` and `contexts: [{name, server, token | token-file, project}]`");
        if explicit {
            err = err.hint("PAM_CONFIG names pamctl's YAML config file (not pamd's TOML)");
        }
        err
    })
}

fn read_token_file(path: &Path) -> std::io::Result<String> {
    Ok(std::fs::read_to_string(path)?.trim().to_string())
}

/// Whether a server URL points at this machine.
pub fn is_loopback(server: &str) -> bool {
    // Several replicas (comma-separated): every one must be loopback.
    if server.contains(',') {
        return server.split(',').all(|s| is_loopback(s.trim()));
    }
    let rest = server.split_once("://").map_or(server, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let authority = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = if let Some(v6) = authority.strip_prefix('[') {
        v6.split(']').next().unwrap_or("")
    } else {
        authority.split(':').next().unwrap_or("")
    };
    host.eq_ignore_ascii_case("localhost") || host == "::1" || host.starts_with("127.")
}

/// Resolves server, token and project (module doc for the order).
pub fn resolve(inputs: &Inputs) -> Result<Resolved> {
    let path = config_path(inputs);
    let file = match &path {
        Some(p) => load_config(p, inputs.env_config.is_some())?,
        None => None,
    };
    let wanted = inputs
        .flag_context
        .clone()
        .or_else(|| file.as_ref().and_then(|f| f.current_context.clone()));
    let context = match &wanted {
        None => None,
        Some(name) => {
            let found = file
                .as_ref()
                .and_then(|f| f.contexts.iter().find(|c| &c.name == name));
            match found {
                Some(c) => Some(c.clone()),
                None => {
                    let known: Vec<&str> = file
                        .iter()
                        .flat_map(|f| f.contexts.iter().map(|c| c.name.as_str()))
                        .collect();
                    let where_ = path
                        .as_ref()
                        .map(|p| p.display().to_string())
                        .unwrap_or_else(|| "the config file".into());
                    let mut err = CliError::usage(format!("no context {name:?} in {where_}"));
                    err = if known.is_empty() {
                        err.hint("the config file defines no contexts")
                    } else {
                        err.hint(format!("known contexts: {}", known.join(", ")))
                    };
                    return Err(err);
                }
            }
        }
    };
    let ctx_name = context.as_ref().map(|c| c.name.clone()).unwrap_or_default();

    let (server, server_source) = if let Some(s) = &inputs.flag_server {
        (s.clone(), Source::Flag)
    } else if let Some(s) = &inputs.env_server {
        (s.clone(), Source::Env)
    } else if let Some(s) = context.as_ref().and_then(|c| c.server.clone()) {
        (s, Source::Context(ctx_name.clone()))
    } else {
        (DEFAULT_SERVER.to_string(), Source::Default)
    };
    let server = server.trim_end_matches('/').to_string();

    let data_dir = data_dir(inputs);
    let (token, token_source) = if let Some(t) = &inputs.flag_token {
        (Some(t.clone()), TokenSource::Flag)
    } else if let Some(t) = &inputs.env_token {
        (Some(t.clone()), TokenSource::Env)
    } else if let Some(c) = context
        .as_ref()
        .filter(|c| c.token.is_some() || c.token_file.is_some())
    {
        let token = match (&c.token, &c.token_file) {
            (Some(t), _) => t.clone(),
            (None, Some(f)) => {
                let f = expand_tilde(f, inputs.home.as_deref());
                read_token_file(&f).map_err(|e| {
                    CliError::usage(format!(
                        "context {:?}: cannot read token-file {}: {e}",
                        c.name,
                        f.display()
                    ))
                })?
            }
            (None, None) => unreachable!("filtered above"),
        };
        (Some(token), TokenSource::Context(ctx_name.clone()))
    } else {
        let admin = data_dir.join("admin.token");
        match read_token_file(&admin) {
            Ok(t) if !t.is_empty() && is_loopback(&server) => {
                (Some(t), TokenSource::AdminFile(admin))
            }
            _ => (None, TokenSource::None),
        }
    };

    let project = inputs
        .flag_project
        .clone()
        .or_else(|| inputs.env_project.clone())
        .or_else(|| context.as_ref().and_then(|c| c.project.clone()));
    let ca_file = inputs
        .flag_ca_file
        .clone()
        .or_else(|| inputs.env_ca_file.clone())
        .or_else(|| context.as_ref().and_then(|c| c.ca_file.clone()))
        .map(|f| expand_tilde(&f, inputs.home.as_deref()));

    Ok(Resolved {
        server,
        server_source,
        token,
        token_source,
        project,
        ca_file,
        data_dir,
        config_path: path,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Home {
        dir: tempfile::TempDir,
    }

    impl Home {
        fn new() -> Home {
            Home {
                dir: tempfile::tempdir().unwrap(),
            }
        }
        fn path(&self) -> PathBuf {
            self.dir.path().to_path_buf()
        }
        fn write(&self, rel: &str, text: &str) -> PathBuf {
            let p = self.dir.path().join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, text).unwrap();
            p
        }
        fn inputs(&self) -> Inputs {
            Inputs {
                home: Some(self.path()),
                ..Inputs::default()
            }
        }
    }

    const CONFIG: &str = "\
current-context: staging
contexts:
  - name: staging
    server: http://staging.example:7700
    token: pam_staging
    project: web
  - name: prod
    server: https://pam.example.com/
    token-file: ~/prod.token
    project: api
";

    #[test]
    fn nothing_configured_uses_local_server_and_admin_token() {
        let h = Home::new();
        h.write(".local/share/pam/admin.token", "pam_admin\n");
        let r = resolve(&h.inputs()).unwrap();
        assert_eq!(r.server, DEFAULT_SERVER);
        assert_eq!(r.server_source, Source::Default);
        assert_eq!(r.token.as_deref(), Some("pam_admin"));
        assert_eq!(
            r.token_source,
            TokenSource::AdminFile(h.path().join(".local/share/pam/admin.token"))
        );
        assert_eq!(r.project, None);
    }

    #[test]
    fn pam_data_dir_moves_the_admin_token() {
        let h = Home::new();
        h.write("data/admin.token", "pam_other");
        let r = resolve(&Inputs {
            env_data_dir: Some(h.path().join("data")),
            ..h.inputs()
        })
        .unwrap();
        assert_eq!(r.token.as_deref(), Some("pam_other"));
    }

    #[test]
    fn no_admin_token_means_no_token() {
        let h = Home::new();
        let r = resolve(&h.inputs()).unwrap();
        assert_eq!(r.token, None);
        assert_eq!(r.token_source, TokenSource::None);
    }

    #[test]
    fn admin_token_is_never_sent_to_a_remote_server() {
        let h = Home::new();
        h.write(".local/share/pam/admin.token", "pam_admin");
        let r = resolve(&Inputs {
            env_server: Some("https://pam.example.com".into()),
            ..h.inputs()
        })
        .unwrap();
        assert_eq!(r.token, None);
        let r = resolve(&Inputs {
            env_server: Some("http://localhost:9000".into()),
            ..h.inputs()
        })
        .unwrap();
        assert_eq!(r.token.as_deref(), Some("pam_admin"));
    }

    #[test]
    fn current_context_from_the_config_file() {
        let h = Home::new();
        h.write(".config/pam/config.yaml", CONFIG);
        h.write(".local/share/pam/admin.token", "pam_admin");
        let r = resolve(&h.inputs()).unwrap();
        assert_eq!(r.server, "http://staging.example:7700");
        assert_eq!(r.server_source, Source::Context("staging".into()));
        assert_eq!(r.token.as_deref(), Some("pam_staging"));
        assert_eq!(r.project.as_deref(), Some("web"));
    }

    #[test]
    fn context_flag_selects_another_context_and_reads_its_token_file() {
        let h = Home::new();
        h.write(".config/pam/config.yaml", CONFIG);
        h.write("prod.token", "pam_prod\n");
        let r = resolve(&Inputs {
            flag_context: Some("prod".into()),
            ..h.inputs()
        })
        .unwrap();
        assert_eq!(r.server, "https://pam.example.com");
        assert_eq!(r.token.as_deref(), Some("pam_prod"));
        assert_eq!(r.token_source, TokenSource::Context("prod".into()));
        assert_eq!(r.project.as_deref(), Some("api"));
    }

    #[test]
    fn env_beats_config_file_and_flags_beat_env() {
        let h = Home::new();
        h.write(".config/pam/config.yaml", CONFIG);
        let env = Inputs {
            env_server: Some("http://env:1".into()),
            env_token: Some("pam_env".into()),
            env_project: Some("envproj".into()),
            ..h.inputs()
        };
        let r = resolve(&env).unwrap();
        assert_eq!(
            (r.server.as_str(), r.token.as_deref(), r.project.as_deref()),
            ("http://env:1", Some("pam_env"), Some("envproj"))
        );
        assert_eq!(r.server_source, Source::Env);
        let r = resolve(&Inputs {
            flag_server: Some("http://flag:2".into()),
            flag_token: Some("pam_flag".into()),
            flag_project: Some("flagproj".into()),
            ..env
        })
        .unwrap();
        assert_eq!(
            (r.server.as_str(), r.token.as_deref(), r.project.as_deref()),
            ("http://flag:2", Some("pam_flag"), Some("flagproj"))
        );
        assert_eq!(r.token_source, TokenSource::Flag);
    }

    #[test]
    fn pam_config_and_xdg_config_home_locate_the_file() {
        let h = Home::new();
        h.write("xdg/pam/config.yaml", CONFIG);
        let r = resolve(&Inputs {
            xdg_config_home: Some(h.path().join("xdg")),
            ..h.inputs()
        })
        .unwrap();
        assert_eq!(r.project.as_deref(), Some("web"));
        let custom = h.write(
            "custom.yaml",
            &CONFIG.replace("current-context: staging", "current-context: prod"),
        );
        h.write("prod.token", "pam_prod");
        let r = resolve(&Inputs {
            env_config: Some(custom),
            xdg_config_home: Some(h.path().join("xdg")),
            ..h.inputs()
        })
        .unwrap();
        assert_eq!(r.project.as_deref(), Some("api"));
    }

    #[test]
    fn unknown_context_is_a_usage_error_listing_the_known_ones() {
        let h = Home::new();
        h.write(".config/pam/config.yaml", CONFIG);
        let e = resolve(&Inputs {
            flag_context: Some("nope".into()),
            ..h.inputs()
        })
        .unwrap_err();
        assert_eq!(e.exit, crate::error::Exit::Usage);
        assert!(
            e.message.starts_with("no context \"nope\" in "),
            "{}",
            e.message
        );
        assert_eq!(e.hints, vec!["known contexts: staging, prod".to_string()]);
    }

    #[test]
    fn missing_explicit_config_and_bad_yaml_are_errors() {
        let h = Home::new();
        let e = resolve(&Inputs {
            env_config: Some(h.path().join("missing.yaml")),
            ..h.inputs()
        })
        .unwrap_err();
        assert!(
            e.message.contains("cannot read config file"),
            "{}",
            e.message
        );
        h.write(".config/pam/config.yaml", "contexts: [{name: a, sever: x}]");
        let e = resolve(&h.inputs()).unwrap_err();
        assert!(e.message.contains("unknown field `sever`"), "{}", e.message);
    }

    #[test]
    fn loopback_detection() {
        for s in [
            "http://127.0.0.1:7700",
            "http://localhost",
            "http://[::1]:7700/x",
            "127.0.0.2:80",
            "http://127.0.0.1:7700,http://localhost:7701",
        ] {
            assert!(is_loopback(s), "{s}");
        }
        for s in [
            "https://pam.example.com",
            "http://10.0.0.1:7700",
            "http://localhost.evil.com",
            // Every replica must be loopback for the admin token to go.
            "http://127.0.0.1:7700,https://pam.example.com",
            "https://pam.example.com,http://127.0.0.1:7700",
        ] {
            assert!(!is_loopback(s), "{s}");
        }
    }
}
