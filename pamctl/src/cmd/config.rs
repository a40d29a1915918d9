//! `pamctl config …` (kubectl's habit): the contexts of pamctl's
//! config file — `current-context`, `get-contexts`, `use-context NAME`,
//! `set-context [NAME] [--server URL] [-p P] [--ca-file F] [--token-file F]`.
//!
//! The file is the one pamctl reads (`PAM_CONFIG`,
//! `$XDG_CONFIG_HOME/pam/config.yaml`, `~/.config/pam/config.yaml`); it
//! is rewritten whole (comments are not kept, as kubectl's are not), made
//! 0600 since a context may hold a token.

use std::path::{Path, PathBuf};

use crate::cli::{ConfigCommand, Global};
use crate::config::{self, ConfigFile, Context, Inputs};
use crate::error::{CliError, Exit, Result};
use crate::render::table::Table;
use crate::term;

pub(crate) fn config(global: &Global, c: ConfigCommand) -> Result<Exit> {
    let path = config::config_path(&Inputs::from_env())
        .ok_or_else(|| CliError::usage("no config file: set PAM_CONFIG or HOME"))?;
    let mut file = read(&path)?;
    match c {
        ConfigCommand::CurrentContext => match &file.current_context {
            Some(name) => term::outln(name),
            None => {
                return Err(CliError::failed(format!(
                    "{} names no current-context",
                    path.display()
                ))
                .hint("pamctl config use-context NAME"))
            }
        },
        ConfigCommand::GetContexts { output } => {
            if output.is_some() {
                let names: String = file
                    .contexts
                    .iter()
                    .map(|c| format!("{}\n", c.name))
                    .collect();
                term::out(&names);
            } else {
                let mut t = Table::new(&["CURRENT", "NAME", "SERVER", "PROJECT"]);
                for c in &file.contexts {
                    let current = file.current_context.as_deref() == Some(c.name.as_str());
                    t.row(vec![
                        if current { "*" } else { "" }.into(),
                        c.name.clone(),
                        c.server.clone().unwrap_or_default(),
                        c.project.clone().unwrap_or_default(),
                    ]);
                }
                term::out(&t.render_rows(true));
            }
        }
        ConfigCommand::UseContext { name } => {
            if !file.contexts.iter().any(|c| c.name == name) {
                return Err(
                    CliError::usage(format!("no context {name:?} in {}", path.display()))
                        .hint(format!("pamctl config set-context {name} --server URL")),
                );
            }
            file.current_context = Some(name.clone());
            write(&path, &file)?;
            term::outln(&format!("Switched to context {name:?}."));
        }
        ConfigCommand::SetContext { name, token_file } => {
            let name = match name.or_else(|| file.current_context.clone()) {
                Some(n) => n,
                None => {
                    return Err(CliError::usage(
                        "pamctl config set-context NAME: no NAME and no current context",
                    ))
                }
            };
            let idx = match file.contexts.iter().position(|c| c.name == name) {
                Some(i) => i,
                None => {
                    file.contexts.push(Context {
                        name: name.clone(),
                        ..Context::default()
                    });
                    file.contexts.len() - 1
                }
            };
            let ctx = &mut file.contexts[idx];
            if let Some(s) = &global.server {
                ctx.server = Some(s.clone());
            }
            if let Some(p) = &global.project {
                ctx.project = Some(p.clone());
            }
            if let Some(f) = &global.ca_file {
                ctx.ca_file = Some(absolute(f));
            }
            if let Some(f) = token_file {
                ctx.token_file = Some(absolute(&f));
                ctx.token = None;
            }
            if file.current_context.is_none() {
                file.current_context = Some(name.clone());
            }
            write(&path, &file)?;
            term::outln(&format!("Context {name:?} set."));
        }
    }
    Ok(Exit::Ok)
}

fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

fn read(path: &Path) -> Result<ConfigFile> {
    match std::fs::read_to_string(path) {
        Ok(t) if t.trim().is_empty() => Ok(ConfigFile::default()),
        Ok(t) => serde_yaml::from_str(&t)
            .map_err(|e| CliError::usage(format!("config file {}: {e}", path.display()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(ConfigFile::default()),
        Err(e) => Err(CliError::usage(format!(
            "cannot read config file {}: {e}",
            path.display()
        ))),
    }
}

fn write(path: &Path, file: &ConfigFile) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let fail = |e: std::io::Error| {
        CliError::failed(format!("cannot write config file {}: {e}", path.display()))
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(fail)?;
    }
    let text = serde_yaml::to_string(file).expect("the config serializes");
    // Written beside, then renamed: a crash never leaves half a file.
    let tmp = path.with_extension("yaml.tmp");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(fail)?;
    f.write_all(text.as_bytes()).map_err(fail)?;
    f.sync_all().map_err(fail)?;
    std::fs::rename(&tmp, path).map_err(fail)
}
