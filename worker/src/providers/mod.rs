//! Provider adapters: turn a [`DesiredRun`] into the provider CLI's headless
//! structured-output command line — its permission flags included — and
//! read each line of that output ([`parser`], [`stream`]).
//!
//! Built-in command lines (each overridable in worker.toml under
//! `[providers.<name>]`: `program` replaces the CLI's program and keeps
//! the arguments; `command` replaces the whole line, where `{prompt}` is
//! replaced by the run's prompt — one argument — and an element
//! `{permissions}` by the permission flags, none when it is absent):
//!
//! | provider | command |
//! |---|---|
//! | claude | `claude -p {prompt} --output-format stream-json --verbose --include-partial-messages {permissions}` |
//! | codex  | `codex exec --json --skip-git-repo-check {permissions} {prompt}` |
//! | gemini | `gemini -p {prompt} --output-format stream-json --skip-trust {permissions}` |
//! | grok   | `grok -p {prompt} --output-format streaming-json` |
//! | exec   | the run's own `command`, as is |
//!
//! The flags per permission mode are each adapter's `permission_args`
//! (docs/agents.md, "Permission modes").
//!
//! grok: xAI's CLI documents `-p/--single <PROMPT>` for headless mode and
//! `--output-format plain|json|streaming-json` (docs.x.ai, "Headless &
//! Scripting"). The shape of its streaming events is not documented there,
//! so its parser is a best effort (see [`grok`]).

mod claude;
mod codex;
mod config;
mod gemini;
mod grok;
pub mod meter;
#[cfg(test)]
mod replay;
pub mod session_file;
pub mod stream;

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use pam_manifests::kinds::Permissions;
use pam_manifests::protocol::DesiredRun;
use serde_json::Value;

pub use config::{ProviderConfig, ProvidersConfig};
pub use stream::{FinalResult, Parsed, StreamParser, UsageReport};

/// The element of a command template that expands to the permission flags.
pub const PERMISSIONS: &str = "{permissions}";

/// The provider CLIs pam knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProviderKind {
    /// Anthropic's Claude Code.
    Claude,
    /// OpenAI's Codex CLI.
    Codex,
    /// Google's Gemini CLI.
    Gemini,
    /// xAI's Grok CLI.
    Grok,
    /// Any command; its output is logged but never parsed.
    Exec,
}

impl ProviderKind {
    /// Every provider.
    pub const ALL: [ProviderKind; 5] = [
        ProviderKind::Claude,
        ProviderKind::Codex,
        ProviderKind::Gemini,
        ProviderKind::Grok,
        ProviderKind::Exec,
    ];

    /// The name in manifests, worker.toml and `--provider`.
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::Claude => "claude",
            ProviderKind::Codex => "codex",
            ProviderKind::Gemini => "gemini",
            ProviderKind::Grok => "grok",
            ProviderKind::Exec => "exec",
        }
    }

    /// The built-in command template; `None` for exec (the run brings one).
    pub fn default_command(self) -> Option<Vec<String>> {
        let v: &[&str] = match self {
            ProviderKind::Claude => &[
                "claude",
                "-p",
                "{prompt}",
                "--output-format",
                "stream-json",
                "--verbose",
                "--include-partial-messages",
                PERMISSIONS,
            ],
            ProviderKind::Codex => &[
                "codex",
                "exec",
                "--json",
                "--skip-git-repo-check",
                PERMISSIONS,
                "{prompt}",
            ],
            ProviderKind::Gemini => &[
                "gemini",
                "-p",
                "{prompt}",
                "--output-format",
                "stream-json",
                "--skip-trust",
                PERMISSIONS,
            ],
            ProviderKind::Grok => &[
                "grok",
                "-p",
                "{prompt}",
                "--output-format",
                "streaming-json",
            ],
            ProviderKind::Exec => return None,
        };
        Some(v.iter().map(|s| s.to_string()).collect())
    }

    /// The program its runs start with `cfg` (worker.toml's table): a
    /// whole `command` override's first element, else `program`, else the
    /// built-in one; `None` for exec (each run brings its own).
    pub fn program(self, cfg: Option<&ProviderConfig>) -> Option<String> {
        match cfg.and_then(|c| c.command.as_ref()) {
            Some(command) => command.first().cloned(),
            None => cfg
                .and_then(|c| c.program.clone())
                .or_else(|| self.default_command().and_then(|c| c.into_iter().next())),
        }
    }

    /// The CLI's flags for permissions `p` (none for grok, whose CLI
    /// documents none, and exec).
    pub fn permission_args(self, p: &Permissions) -> Vec<String> {
        match self {
            ProviderKind::Claude => claude::permission_args(p),
            ProviderKind::Codex => codex::permission_args(p),
            ProviderKind::Gemini => gemini::permission_args(p),
            ProviderKind::Grok | ProviderKind::Exec => Vec::new(),
        }
    }

    /// A reader of this provider's output for one attempt; `None` for
    /// exec, whose output is only logged.
    pub fn parser(self) -> Option<Box<dyn StreamParser>> {
        Some(match self {
            ProviderKind::Claude => Box::new(claude::Parser::default()),
            ProviderKind::Codex => Box::new(codex::Parser::default()),
            ProviderKind::Gemini => Box::new(gemini::Parser::default()),
            ProviderKind::Grok => Box::new(grok::Parser::default()),
            ProviderKind::Exec => return None,
        })
    }
}

impl fmt::Display for ProviderKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ProviderKind {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> anyhow::Result<ProviderKind> {
        ProviderKind::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "unknown provider {s:?}; expected one of: claude, codex, gemini, grok, exec"
                )
            })
    }
}

/// The command and extra environment for one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandLine {
    /// argv, program first.
    pub argv: Vec<String>,
    /// The provider's configured env, then the run's env on top.
    pub env: BTreeMap<String, String>,
}

/// Builds the command line for `run` from the built-in template or the
/// worker.toml override.
pub fn command_line(run: &DesiredRun, providers: &ProvidersConfig) -> anyhow::Result<CommandLine> {
    let kind: ProviderKind = run.provider.parse()?;
    let cfg: Option<&ProviderConfig> = providers.get(kind);
    let template = match kind {
        ProviderKind::Exec => run
            .command
            .clone()
            .or_else(|| cfg.and_then(|c| c.command.clone()))
            .ok_or_else(|| {
                anyhow::anyhow!("run {} uses provider exec but has no command", run.run_id)
            })?,
        _ => match cfg.and_then(|c| c.command.clone()) {
            Some(command) => command,
            None => {
                let mut t = kind
                    .default_command()
                    .expect("every provider but exec has a default command");
                t[0] = kind.program(cfg).expect("a program");
                t
            }
        },
    };
    if template.is_empty() {
        anyhow::bail!("provider {kind} has an empty command");
    }
    let argv = if kind == ProviderKind::Exec && run.command.is_some() {
        template
    } else {
        let flags = run
            .permissions
            .as_ref()
            .map(|p| kind.permission_args(p))
            .unwrap_or_default();
        template
            .iter()
            .flat_map(|a| {
                if a == PERMISSIONS {
                    flags.clone()
                } else {
                    vec![a.replace("{prompt}", &run.prompt)]
                }
            })
            .collect()
    };
    let mut env = cfg.map(|c| c.env.clone()).unwrap_or_default();
    env.extend(run.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    Ok(CommandLine { argv, env })
}

/// Parses one line of stdout with `parser`: `None` when it is not the
/// provider's structured format (it is still logged).
pub fn parse_line(parser: &mut dyn StreamParser, line: &str) -> Option<Parsed> {
    let line = line.trim();
    if !line.starts_with('{') {
        return None;
    }
    let v = serde_json::from_str::<Value>(line)
        .ok()
        .filter(Value::is_object)?;
    let mut out = Parsed::default();
    parser.line(&v, &mut out);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pam_manifests::kinds::PermissionMode;
    use uuid::Uuid;

    fn run(provider: &str, prompt: &str) -> DesiredRun {
        DesiredRun {
            run_id: Uuid::nil(),
            attempt: 1,
            session_name: "pam-00000000".into(),
            provider: provider.into(),
            prompt: prompt.into(),
            cwd: "/tmp".into(),
            command: None,
            env: BTreeMap::from([("RUN_ENV".into(), "1".into())]),
            env_error: None,
            stop: false,
            signals: vec![],
            input: vec![],
            workspace: None,
            permissions: None,
        }
    }

    fn with(mut r: DesiredRun, mode: PermissionMode) -> DesiredRun {
        r.permissions = Some(Permissions {
            mode,
            allow_tools: vec!["WebFetch".into()],
            deny_tools: vec!["Bash(rm:*)".into()],
        });
        r
    }

    #[test]
    fn defaults_put_the_prompt_in_one_argument_and_no_flags_without_permissions() {
        let p = ProvidersConfig::default();
        let c = command_line(&run("claude", "fix the bug; rm -rf /"), &p).unwrap();
        assert_eq!(
            c.argv,
            [
                "claude",
                "-p",
                "fix the bug; rm -rf /",
                "--output-format",
                "stream-json",
                "--verbose",
                "--include-partial-messages"
            ]
        );
        assert_eq!(
            command_line(&run("codex", "x y"), &p).unwrap().argv,
            ["codex", "exec", "--json", "--skip-git-repo-check", "x y"]
        );
        assert_eq!(
            command_line(&run("gemini", "x"), &p).unwrap().argv,
            [
                "gemini",
                "-p",
                "x",
                "--output-format",
                "stream-json",
                "--skip-trust"
            ]
        );
        assert_eq!(
            command_line(&run("grok", "x"), &p).unwrap().argv,
            ["grok", "-p", "x", "--output-format", "streaming-json"]
        );
        assert!(command_line(&run("nope", "x"), &p).is_err());
        let err = command_line(&run("exec", "x"), &p).unwrap_err().to_string();
        assert!(err.contains("has no command"), "{err}");
    }

    #[test]
    fn each_mode_becomes_the_clis_own_flags() {
        let p = ProvidersConfig::default();
        let argv = |provider: &str, mode| {
            command_line(&with(run(provider, "x"), mode), &p)
                .unwrap()
                .argv
        };
        let claude = argv("claude", PermissionMode::ReadOnly);
        assert_eq!(
            claude[7..],
            [
                "--permission-mode",
                "plan",
                "--allowedTools",
                "WebFetch",
                "--disallowedTools",
                "Bash(rm:*)"
            ]
        );
        let claude = argv("claude", PermissionMode::Edits);
        assert_eq!(claude[7..9], ["--permission-mode", "acceptEdits"]);
        assert!(
            claude.contains(&"Bash(cargo:*)".to_string())
                && claude.contains(&"WebFetch".to_string())
        );
        assert_eq!(argv("claude", PermissionMode::Full)[8], "bypassPermissions");
        assert_eq!(
            argv("codex", PermissionMode::ReadOnly),
            [
                "codex",
                "exec",
                "--json",
                "--skip-git-repo-check",
                "--sandbox",
                "read-only",
                "x"
            ]
        );
        assert_eq!(argv("codex", PermissionMode::Edits)[5], "workspace-write");
        assert_eq!(argv("codex", PermissionMode::Full)[5], "danger-full-access");
        assert_eq!(
            argv("gemini", PermissionMode::ReadOnly)[6..],
            ["--approval-mode", "default", "--allowed-tools", "WebFetch"]
        );
        let gemini = argv("gemini", PermissionMode::Edits);
        assert_eq!(gemini[6..8], ["--approval-mode", "auto_edit"]);
        assert!(gemini.contains(&"run_shell_command(cargo)".to_string()));
        assert_eq!(argv("gemini", PermissionMode::Full)[7], "yolo");
        assert_eq!(argv("grok", PermissionMode::Full).len(), 5);
    }

    #[test]
    fn config_overrides_command_and_env_and_exec_runs_as_is() {
        let p: ProvidersConfig = toml::from_str(
            r#"
            [claude]
            command = ["fake", "--prompt={prompt}", "{prompt}"]
            env = { A = "cfg", RUN_ENV = "cfg" }
            [codex]
            command = ["fake", "{permissions}", "{prompt}"]
            [gemini]
            program = "/opt/gemini/bin/gemini"
            "#,
        )
        .unwrap();
        let c = command_line(&with(run("claude", "hi there"), PermissionMode::Full), &p).unwrap();
        assert_eq!(
            c.argv,
            ["fake", "--prompt=hi there", "hi there"],
            "the override wins"
        );
        assert_eq!(c.env["A"], "cfg");
        assert_eq!(c.env["RUN_ENV"], "1", "the run's env wins");
        let c = command_line(&with(run("codex", "go"), PermissionMode::Full), &p).unwrap();
        assert_eq!(c.argv, ["fake", "--sandbox", "danger-full-access", "go"]);
        let c = command_line(&run("gemini", "go"), &p).unwrap();
        assert_eq!(c.argv[..3], ["/opt/gemini/bin/gemini", "-p", "go"]);
        let mut e = run("exec", "ignored");
        e.command = Some(vec![
            "echo".into(),
            "{prompt}".into(),
            "{permissions}".into(),
        ]);
        assert_eq!(
            command_line(&with(e, PermissionMode::Full), &p)
                .unwrap()
                .argv,
            ["echo", "{prompt}", "{permissions}"]
        );
    }

    #[test]
    fn non_json_lines_are_unstructured() {
        for kind in ProviderKind::ALL {
            let Some(mut p) = kind.parser() else {
                assert_eq!(kind, ProviderKind::Exec);
                continue;
            };
            assert_eq!(parse_line(p.as_mut(), "Loading…"), None);
            assert_eq!(parse_line(p.as_mut(), "{not json"), None);
            assert_eq!(parse_line(p.as_mut(), "[1, 2]"), None);
        }
    }
}
