//! Dynamic shell completion, the way kubectl (cobra) does it: the shell
//! script that `pamctl completion SHELL` prints hands the words typed so
//! far to the hidden `pamctl __complete WORD… CURRENT`, which prints the
//! candidates for CURRENT, one per line, then a `:DIRECTIVE` line
//! ([`FILES`], [`NO_SPACE`]). Verbs and flags come from the clap
//! definition; kinds, fields and enum values from pamctl itself; projects
//! and object names from the server, asked with a short timeout so a
//! slow or absent server costs a TAB at most [`SERVER_TIMEOUT`].

mod scripts;

use std::ffi::OsString;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Arg, Command};
use pam_manifests::Kind;

use crate::{cli, parse_kind, Ctx};

pub use scripts::script;

/// Directive bit: complete file names (the shell does it).
pub const FILES: u8 = 1;
/// Directive bit: no space after the candidate (`run/`, `phase=`).
pub const NO_SPACE: u8 = 2;
/// How long a TAB may wait for the server.
pub const SERVER_TIMEOUT: Duration = Duration::from_secs(2);

/// What to offer for the current word.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Candidates {
    pub words: Vec<String>,
    pub directive: u8,
}

/// `pamctl __complete WORD… CURRENT`: prints the candidates; never fails
/// (a completion that goes wrong offers nothing).
pub fn run(args: &[OsString]) -> ExitCode {
    let words: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let c = complete(&words, &mut ServerNames);
    let mut out = String::new();
    for w in &c.words {
        out.push_str(w);
        out.push('\n');
    }
    out.push_str(&format!(":{}\n", c.directive));
    crate::term::out(&out);
    ExitCode::SUCCESS
}

/// Where object names come from (the server; a fixed list in tests).
pub trait Names {
    fn names(&mut self, global: &cli::Global, kind: Kind) -> Vec<String>;
}

/// Names from the server, with [`SERVER_TIMEOUT`].
struct ServerNames;

impl Names for ServerNames {
    fn names(&mut self, global: &cli::Global, kind: Kind) -> Vec<String> {
        let mut ctx = Ctx::new(global.clone());
        let Ok(project) = ctx.project_for(kind) else {
            return Vec::new();
        };
        let Ok(client) = ctx
            .resolved()
            .and_then(|r| crate::client::Client::with_timeout(r, SERVER_TIMEOUT))
        else {
            return Vec::new();
        };
        client.names(kind, project.as_deref())
    }
}

/// Where the walk over the typed words ended.
struct Walk<'a> {
    cmd: &'a Command,
    /// The verb path (`["task", "start"]`).
    path: Vec<String>,
    positionals: Vec<String>,
    /// The flag whose value the current word is.
    pending: Option<&'a Arg>,
    global: cli::Global,
    after_dashes: bool,
}

fn find_arg<'a>(root: &'a Command, cmd: &'a Command, word: &str) -> Option<&'a Arg> {
    let matches = |a: &&Arg| match word.strip_prefix("--") {
        Some(long) => a.get_long() == Some(long),
        None => {
            let mut c = word.chars().skip(1);
            let short = c.next();
            short.is_some() && a.get_short() == short
        }
    };
    cmd.get_arguments().find(matches).or_else(|| {
        root.get_arguments()
            .filter(|a| a.is_global_set())
            .find(matches)
    })
}

fn takes_value(a: &Arg) -> bool {
    a.get_num_args().is_none_or(|n| n.takes_values())
        && !matches!(
            a.get_action(),
            clap::ArgAction::SetTrue | clap::ArgAction::SetFalse | clap::ArgAction::Count
        )
}

fn record_global(global: &mut cli::Global, arg: &Arg, value: &str) {
    let v = Some(value.to_string());
    match arg.get_id().as_str() {
        "server" => global.server = v,
        "token" => global.token = v,
        "context" => global.context = v,
        "project" => global.project = v,
        _ => {}
    }
}

fn walk<'a>(root: &'a Command, done: &[String]) -> Walk<'a> {
    let mut w = Walk {
        cmd: root,
        path: Vec::new(),
        positionals: Vec::new(),
        pending: None,
        global: cli::Global::default(),
        after_dashes: false,
    };
    for word in done {
        if let Some(arg) = w.pending.take() {
            record_global(&mut w.global, arg, word);
            continue;
        }
        if w.after_dashes {
            w.positionals.push(word.clone());
            continue;
        }
        if word == "--" {
            w.after_dashes = true;
            continue;
        }
        if word.starts_with('-') && word.len() > 1 {
            let (flag, inline) = match word.split_once('=') {
                Some((f, v)) => (f, Some(v)),
                None if !word.starts_with("--") && word.len() > 2 => (&word[..2], Some(&word[2..])),
                None => (word.as_str(), None),
            };
            if let Some(arg) = find_arg(root, w.cmd, flag) {
                match inline {
                    Some(v) => record_global(&mut w.global, arg, v),
                    None if takes_value(arg) => w.pending = Some(arg),
                    None => {}
                }
            }
            continue;
        }
        if let Some(sub) = w
            .cmd
            .get_subcommands()
            .find(|s| s.get_name() == word || s.get_all_aliases().any(|a| a == word))
        {
            w.cmd = sub;
            w.path.push(sub.get_name().to_string());
            continue;
        }
        w.positionals.push(word.clone());
    }
    w
}

/// The candidates for the last of `words` (the word being typed) after
/// the others.
pub fn complete(words: &[String], names: &mut dyn Names) -> Candidates {
    let root = crate::examples::command();
    let (current, done) = match words.split_last() {
        Some((c, d)) => (c.as_str(), d),
        None => ("", &[][..]),
    };
    let w = walk(&root, done);
    let mut c = if let Some(arg) = w.pending {
        flag_values(&w, arg, current, names)
    } else if let Some((flag, value)) = current
        .strip_prefix("--")
        .and_then(|f| f.split_once('='))
        .filter(|_| !w.after_dashes)
    {
        // `--for=ph`: the value, offered with its flag.
        match find_arg(&root, w.cmd, &format!("--{flag}")) {
            Some(arg) => {
                let mut inner = flag_values(&w, arg, value, names);
                for v in &mut inner.words {
                    *v = format!("--{flag}={v}");
                }
                inner
            }
            None => Candidates::default(),
        }
    } else if current.starts_with('-') && !w.after_dashes {
        flags(&root, w.cmd)
    } else if w.cmd.has_subcommands() && w.positionals.is_empty() {
        Candidates {
            words: w
                .cmd
                .get_subcommands()
                .filter(|s| !s.is_hide_set() && s.get_name() != "help")
                .map(|s| s.get_name().to_string())
                .collect(),
            directive: 0,
        }
    } else {
        positional(&w, current, names)
    };
    c.words.retain(|cand| cand.starts_with(current));
    c.words.dedup();
    // A space after `table` but not after `jsonpath=` or `run/`: shells
    // add one only when a single candidate is inserted, so the bit
    // matters only when one is left. Field paths may always go deeper.
    let open_ended = c.words.iter().any(|w| w.ends_with(['=', '/']));
    if w.path.first().map(String::as_str) != Some("explain") && !open_ended {
        c.directive &= !NO_SPACE;
    }
    c
}

fn flags(root: &Command, cmd: &Command) -> Candidates {
    let mut words: Vec<String> = cmd
        .get_arguments()
        .chain(root.get_arguments().filter(|a| a.is_global_set()))
        .filter(|a| !a.is_hide_set())
        .filter_map(|a| a.get_long().map(|l| format!("--{l}")))
        .collect();
    words.sort();
    words.dedup();
    Candidates {
        words,
        directive: 0,
    }
}

fn kinds() -> Vec<String> {
    let mut k: Vec<String> = Kind::ALL.iter().map(|k| k.plural().to_string()).collect();
    k.sort();
    k
}

fn plain(words: Vec<String>) -> Candidates {
    Candidates {
        words,
        directive: 0,
    }
}

fn flag_values(w: &Walk, arg: &Arg, current: &str, names: &mut dyn Names) -> Candidates {
    let id = arg.get_id().as_str();
    let verb = w.path.first().map(String::as_str).unwrap_or("");
    match id {
        "project" => plain(names.names(&w.global, Kind::Project)),
        "files" | "config" => Candidates {
            words: Vec::new(),
            directive: FILES,
        },
        "context" => plain(contexts()),
        "task" => plain(names.names(&w.global, Kind::Task)),
        "target_host" => plain(names.names(&w.global, Kind::Host)),
        "provider" => plain(
            ["claude", "codex", "gemini", "grok", "exec"]
                .map(String::from)
                .to_vec(),
        ),
        "output" if verb == "get" => Candidates {
            words: [
                "table",
                "wide",
                "yaml",
                "json",
                "name",
                "jsonpath=",
                "custom-columns=",
            ]
            .map(String::from)
            .to_vec(),
            directive: if current.contains('=') { 0 } else { NO_SPACE },
        },
        // `get events --for KIND/NAME`: the object's kind, then
        // its names.
        "for_" if verb == "get" || verb == "events" => match current.split_once('/') {
            Some((k, _)) => match parse_kind(k) {
                Ok(kind) => plain(
                    names
                        .names(&w.global, kind)
                        .into_iter()
                        .map(|n| format!("{k}/{n}"))
                        .collect(),
                ),
                Err(_) => Candidates::default(),
            },
            None => Candidates {
                words: Kind::ALL
                    .iter()
                    .map(|k| format!("{}/", k.singular()))
                    .collect(),
                directive: NO_SPACE,
            },
        },
        "for_" => {
            let kind = w
                .positionals
                .first()
                .and_then(|p| parse_kind(p.split('/').next().unwrap_or(p)).ok());
            let mut words = vec![
                "condition=".to_string(),
                "phase=".to_string(),
                "delete".to_string(),
            ];
            if let Some(k) = kind {
                words.extend(k.info().phases.iter().map(|p| format!("phase={p}")));
            }
            let directive = if current.starts_with("phase=") {
                0
            } else {
                NO_SPACE
            };
            Candidates { words, directive }
        }
        _ => plain(
            arg.get_possible_values()
                .iter()
                .filter(|v| !v.is_hide_set())
                .map(|v| v.get_name().to_string())
                .collect(),
        ),
    }
}

fn contexts() -> Vec<String> {
    let inputs = crate::config::Inputs::from_env();
    let Some(path) = crate::config::config_path(&inputs) else {
        return Vec::new();
    };
    let Ok(text) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    serde_yaml::from_str::<crate::config::ConfigFile>(&text)
        .map(|f| f.contexts.into_iter().map(|c| c.name).collect())
        .unwrap_or_default()
}

/// `KIND`, `KIND,KIND`, `KIND/NAME` and names, for the verbs that take
/// objects; run, task and host names for the verbs about one of those.
fn positional(w: &Walk, current: &str, names: &mut dyn Names) -> Candidates {
    let verb: Vec<&str> = w.path.iter().map(String::as_str).collect();
    let object_verbs = [
        "get", "describe", "delete", "wait", "edit", "label", "annotate",
    ];
    match verb.as_slice() {
        [v] if object_verbs.contains(v) => objects(w, current, names),
        ["explain"] if w.positionals.is_empty() => {
            let words = if current.contains('.') {
                crate::cmd::explain::children(current)
            } else {
                Kind::ALL
                    .iter()
                    .map(|k| format!("{}.", k.singular()))
                    .chain(kinds())
                    .collect()
            };
            Candidates {
                words,
                directive: NO_SPACE,
            }
        }
        ["config", "use-context" | "set-context"] if w.positionals.is_empty() => plain(contexts()),
        ["logs" | "transcript" | "stop" | "rerun" | "signal" | "attach" | "result"]
            if w.positionals.is_empty() =>
        {
            plain(names.names(&w.global, Kind::Run))
        }
        ["task", _] if w.positionals.is_empty() => plain(names.names(&w.global, Kind::Task)),
        ["host", _] if w.positionals.is_empty() => plain(names.names(&w.global, Kind::Host)),
        ["run", "start"] if w.after_dashes => Candidates {
            words: Vec::new(),
            directive: FILES,
        },
        _ => {
            let idx = w.positionals.len();
            let arg = w.cmd.get_positionals().nth(idx);
            plain(arg.map_or_else(Vec::new, |a| {
                a.get_possible_values()
                    .iter()
                    .map(|v| v.get_name().to_string())
                    .collect()
            }))
        }
    }
}

fn objects(w: &Walk, current: &str, names: &mut dyn Names) -> Candidates {
    if let Some((kind_text, _)) = current.split_once('/') {
        let Ok(kind) = parse_kind(kind_text) else {
            return Candidates::default();
        };
        return plain(
            names
                .names(&w.global, kind)
                .into_iter()
                .map(|n| format!("{kind_text}/{n}"))
                .collect(),
        );
    }
    let Some(first) = w.positionals.first() else {
        if let Some((done, _)) = current.rsplit_once(',') {
            return plain(kinds().into_iter().map(|k| format!("{done},{k}")).collect());
        }
        let mut words = kinds();
        if w.path.first().is_some_and(|v| v == "get") {
            // Listed by `get` only (completion lists every
            // resource `get` takes).
            words.push(crate::cmd::webhooks::NAMES[0].to_string());
            words.push(crate::cmd::events::NAMES[0].to_string());
            words.sort();
        }
        words.extend(Kind::ALL.iter().map(|k| format!("{}/", k.singular())));
        return Candidates {
            words,
            directive: NO_SPACE,
        };
    };
    if first.contains('/') {
        return Candidates {
            words: Kind::ALL
                .iter()
                .map(|k| format!("{}/", k.singular()))
                .collect(),
            directive: NO_SPACE,
        };
    }
    match parse_kind(first.split(',').next().unwrap_or(first)) {
        Ok(kind) => plain(names.names(&w.global, kind)),
        Err(_) => Candidates::default(),
    }
}

#[cfg(test)]
mod tests;
