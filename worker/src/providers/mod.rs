//! Provider adapters: turn a [`DesiredRun`] into the provider CLI's headless
//! structured-output command line, and turn each line of that output into
//! progress (see [`parse_line`]).
//!
//! Built-in command lines (each overridable in worker.toml under
//! `[providers.<name>] command = [...]`; `{prompt}` inside any element is
//! replaced by the run's prompt, and the element stays ONE argument):
//!
//! | provider | command |
//! |---|---|
//! | claude | `claude -p {prompt} --output-format stream-json --verbose` |
//! | codex  | `codex exec --json {prompt}` |
//! | gemini | `gemini -p {prompt} --output-format stream-json` |
//! | grok   | `grok -p {prompt} --output-format streaming-json` |
//! | exec   | the run's own `command`, as is |
//!
//! grok: xAI's CLI documents `-p/--single <PROMPT>` for headless mode and
//! `--output-format plain|json|streaming-json` (docs.x.ai, "Headless &
//! Scripting"). The shape of its streaming events is not documented there,
//! so its parser is a best effort (see [`grok`]).

mod claude;
mod codex;
mod gemini;
mod grok;

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use pam_manifests::protocol::{DesiredRun, TokenUsage};
use serde_json::Value;

use crate::config::{ProviderConfig, ProvidersConfig};

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
            ],
            ProviderKind::Codex => &["codex", "exec", "--json", "{prompt}"],
            ProviderKind::Gemini => &["gemini", "-p", "{prompt}", "--output-format", "stream-json"],
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
        _ => cfg
            .and_then(|c| c.command.clone())
            .or_else(|| kind.default_command())
            .expect("every provider but exec has a default command"),
    };
    if template.is_empty() {
        anyhow::bail!("provider {kind} has an empty command");
    }
    let argv = if kind == ProviderKind::Exec && run.command.is_some() {
        template
    } else {
        template
            .iter()
            .map(|a| a.replace("{prompt}", &run.prompt))
            .collect()
    };
    let mut env = cfg.map(|c| c.env.clone()).unwrap_or_default();
    env.extend(run.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    Ok(CommandLine { argv, env })
}

/// One unit of progress from a provider's stream.
#[derive(Debug, Clone, PartialEq)]
pub struct ProgressItem {
    /// A short human summary (≤ 200 chars).
    pub summary: String,
    /// Token usage of this step, when the provider reports it.
    pub usage: Option<TokenUsage>,
}

/// The provider's final result line.
#[derive(Debug, Clone, PartialEq)]
pub struct FinalResult {
    /// Whether the provider reports success.
    pub success: bool,
    /// A short human summary.
    pub summary: String,
    /// Totals for the whole run, when reported.
    pub usage: Option<TokenUsage>,
}

/// What one line of provider output means.
#[derive(Debug, Clone, PartialEq)]
pub enum LineEvent {
    /// Not the provider's structured format: logged, no progress.
    Unstructured,
    /// Structured but not progress (init, echoes of the user's input, deltas).
    Quiet,
    /// A progress item.
    Progress(ProgressItem),
    /// The final result.
    Final(FinalResult),
}

/// Parses one line of `kind`'s stdout.
pub fn parse_line(kind: ProviderKind, line: &str) -> LineEvent {
    if kind == ProviderKind::Exec {
        return LineEvent::Unstructured;
    }
    let line = line.trim();
    if !line.starts_with('{') {
        return LineEvent::Unstructured;
    }
    let Ok(v) = serde_json::from_str::<Value>(line) else {
        return LineEvent::Unstructured;
    };
    if !v.is_object() {
        return LineEvent::Unstructured;
    }
    match kind {
        ProviderKind::Claude => claude::parse(&v),
        ProviderKind::Codex => codex::parse(&v),
        ProviderKind::Gemini => gemini::parse(&v),
        ProviderKind::Grok => grok::parse(&v),
        ProviderKind::Exec => LineEvent::Unstructured,
    }
}

/// `s` cut to at most `max` chars on a char boundary, one line.
pub(crate) fn summarize(s: &str, max: usize) -> String {
    let one_line: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().count() <= max {
        return one_line;
    }
    let mut out: String = one_line.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// `v[key]` as u64, accepting integers and integral floats.
pub(crate) fn u64_at(v: &Value, key: &str) -> Option<u64> {
    let x = v.get(key)?;
    x.as_u64().or_else(|| x.as_f64().map(|f| f as u64))
}

pub(crate) fn str_at<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;
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

    #[test]
    fn defaults_put_the_prompt_in_one_argument() {
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
                "--verbose"
            ]
        );
        assert_eq!(
            command_line(&run("codex", "x y"), &p).unwrap().argv,
            ["codex", "exec", "--json", "x y"]
        );
        assert_eq!(
            command_line(&run("gemini", "x"), &p).unwrap().argv,
            ["gemini", "-p", "x", "--output-format", "stream-json"]
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
    fn config_overrides_command_and_env_and_exec_runs_as_is() {
        let p: ProvidersConfig = toml::from_str(
            r#"
            [claude]
            command = ["fake", "--prompt={prompt}", "{prompt}"]
            env = { A = "cfg", RUN_ENV = "cfg" }
            "#,
        )
        .unwrap();
        let c = command_line(&run("claude", "hi there"), &p).unwrap();
        assert_eq!(c.argv, ["fake", "--prompt=hi there", "hi there"]);
        assert_eq!(c.env["A"], "cfg");
        assert_eq!(c.env["RUN_ENV"], "1", "the run's env wins");
        let mut e = run("exec", "ignored");
        e.command = Some(vec!["echo".into(), "{prompt}".into()]);
        assert_eq!(command_line(&e, &p).unwrap().argv, ["echo", "{prompt}"]);
    }

    #[test]
    fn non_json_lines_are_unstructured() {
        for kind in ProviderKind::ALL {
            assert_eq!(parse_line(kind, "Loading…"), LineEvent::Unstructured);
            assert_eq!(parse_line(kind, "{not json"), LineEvent::Unstructured);
        }
        assert_eq!(
            parse_line(ProviderKind::Exec, r#"{"type":"result"}"#),
            LineEvent::Unstructured
        );
    }

    #[test]
    fn summarize_cuts_on_char_boundaries() {
        assert_eq!(summarize("a\n  b", 10), "a b");
        assert_eq!(summarize("ééééé", 3), "éé…");
    }
}
