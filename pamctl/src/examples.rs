//! The `Examples:` section of every verb's `--help`, kept out of the clap
//! definitions (cli/mod.rs) so they stay readable. [`command`] is the clap
//! command pamctl parses with; a test checks that no verb lacks examples.

use clap::CommandFactory;

use crate::cli::Cli;

/// `(verb path, examples)`; a path is the verb and any sub-verb.
const EXAMPLES: &[(&[&str], &str)] = &[
    (
        &["config", "set-context"],
        "  pamctl config set-context prod --server https://pam.example.com --token-file ~/.pam-prod.token -p web
  pamctl config set-context -n api      # the current context's default project",
    ),
    (&["config", "use-context"], "  pamctl config use-context prod"),
    (
        &["config", "get-contexts"],
        "  pamctl config get-contexts
  pamctl config get-contexts -o name",
    ),
    (&["config", "current-context"], "  pamctl config current-context"),
    (
        &["config"],
        "  pamctl config get-contexts
  pamctl config set-context dev --server http://127.0.0.1:7700 -p demo && pamctl config use-context dev",
    ),
    (
        &["secret", "rotate-key"],
        "  pamctl secret rotate-key
  pamctl secret rotate-key && cp ~/.local/share/pam/secrets.key /backup/",
    ),
    (
        &["schedule", "trigger"],
        "  pamctl -p web schedule trigger nightly-index
  pamctl -p web logs \"$(pamctl -p web schedule trigger nightly-index)\" -f",
    ),
    (
        &["apply"],
        "  pamctl apply -f project.yaml
  pamctl apply -f manifests/ -R --prune --applyset web
  pamctl get task build -o yaml | pamctl apply -f -
  pamctl apply -f tasks.yaml --dry-run=server",
    ),
    (
        &["diff"],
        "  pamctl diff -f manifests/ -R
  pamctl diff -f tasks.yaml && echo 'nothing would change'",
    ),
    (
        &["get"],
        "  pamctl -p web get tasks
  pamctl -p web get runs,tasks
  pamctl -p web get run/build-1 run/build-2 -o wide
  pamctl get tasks -A -l app=web --show-labels -L tier
  pamctl -p web get runs --sort-by=.status.attempt --no-headers
  pamctl -p web get runs -o jsonpath='{range .items[*]}{.metadata.name}{\"\\t\"}{.status.phase}{\"\\n\"}{end}'
  pamctl -p web get runs -o custom-columns=NAME:.metadata.name,PHASE:.status.phase
  pamctl get hosts -w
  pamctl get webhookdeliveries ci -o wide
  pamctl -p web get events --for run/build-1 -w
  pamctl get events --types run.failed,worker. -o wide",
    ),
    (
        &["top"],
        "  pamctl -p web top runs
  pamctl top runs -A --limit 5
  pamctl -p web top tasks
  pamctl top projects",
    ),
    (
        &["wait"],
        "  pamctl -p web wait run/build-1 --for=phase=exited --timeout 5m
  pamctl -p web wait tasks -l app=web --for=condition=Ready --timeout 1m30s
  pamctl -p web wait run/build-1 --for=delete",
    ),
    (
        &["sync"],
        "  pamctl sync webshop
  pamctl sync webshop --timeout 2m",
    ),
    (
        &["describe"],
        "  pamctl -p web describe run build-1
  pamctl describe host/alpha",
    ),
    (
        &["delete"],
        "  pamctl -p web delete task build
  pamctl -p web delete run/build-1 run/build-2 --ignore-not-found
  pamctl delete -f manifests/ -R
  pamctl -p web delete runs -l app=web
  pamctl -p web delete runs --all --yes",
    ),
    (
        &["validate"],
        "  pamctl validate -f manifests/ -R
  cat task.yaml | pamctl validate -f -",
    ),
    (&["task"], "  pamctl -p web task start build\n  pamctl -p web task cancel release-1 --yes"),
    (&["task", "start"], "  pamctl -p web task start build"),
    (&["task", "done"], "  pamctl -p web task done build"),
    (&["task", "cancel"], "  pamctl -p web task cancel release-1\n  pamctl -p web task cancel release-1 --yes"),
    (&["task", "reopen"], "  pamctl -p web task reopen build"),
    (&["host"], "  pamctl host disable alpha\n  pamctl host clear-suspect alpha"),
    (&["host", "disable"], "  pamctl host disable alpha"),
    (&["host", "enable"], "  pamctl host enable alpha"),
    (&["host", "clear-suspect"], "  pamctl host clear-suspect alpha"),
    (&["token"], "  pamctl token create ci\n  pamctl token list"),
    (&["schedule"], "  pamctl -p web schedule trigger nightly-index"),
    (&["secret"], "  pamctl secret rotate-key"),
    (
        &["token", "create"],
        "  pamctl token create ci > ci.token
  pamctl token create web-ci --role operator --project web > web-ci.token
  pamctl token create dash --role viewer --project web,api > dash.token
  pamctl token create --worker alpha > alpha.token",
    ),
    (&["whoami"], "  pamctl whoami"),
    (&["auth"], "  pamctl auth can-i delete runs -p web"),
    (
        &["auth", "can-i"],
        "  pamctl auth can-i delete runs -p web\n  pamctl auth can-i list tokens",
    ),
    (&["token", "list"], "  pamctl token list"),
    (&["token", "revoke"], "  pamctl token revoke 2f0c6a1e-…"),
    (
        &["webhook"],
        "  pamctl get webhookdeliveries ci\n  pamctl webhook redeliver 7d3e2c1a-…",
    ),
    (
        &["webhook", "redeliver"],
        "  pamctl get webhookdeliveries ci | grep failed\n  pamctl webhook redeliver 7d3e2c1a-…",
    ),
    (
        &["run"],
        "  pamctl -p web run start --task build --provider claude --cwd /src/web --prompt 'make it build'",
    ),
    (
        &["run", "start"],
        "  pamctl -p web run start --task build --provider claude --cwd /src/web --prompt 'make it build'
  pamctl -p web run start --task build --provider exec --cwd /tmp --name r2 -- make test
  pamctl -p web run start --task build --provider exec --cwd /tmp --command sh --command -c --command 'make test'
  pamctl -p web run start --task build --provider codex --cwd /src --selector gpu=true --max-attempts 3",
    ),
    (&["stop"], "  pamctl -p web stop build-1"),
    (&["rerun"], "  pamctl -p web rerun build-1"),
    (
        &["suspend"],
        "  pamctl suspend source repo\n  pamctl -p web suspend schedule nightly",
    ),
    (
        &["resume"],
        "  pamctl resume source repo\n  pamctl -p web resume schedule/nightly",
    ),
    (&["signal"], "  pamctl -p web signal build-1 --signal INT"),
    (&["attach"], "  pamctl -p web attach build-1\n  pamctl -p web attach build-1 --ttl 1m"),
    (
        &["logs"],
        "  pamctl -p web logs build-1
  pamctl -p web logs build-1 --tail 20
  pamctl -p web logs build-1 --since 10m
  pamctl -p web logs -f build-1
  pamctl -p web logs build-1 --attempt 1",
    ),
    (
        &["transcript"],
        "  pamctl -p web transcript build-1
  pamctl -p web transcript -f build-1
  pamctl -p web transcript build-1 -o json | jq -c 'select(.kind == \"tool_call\")'",
    ),
    (
        &["result"],
        "  pamctl -p web result build-1
  pamctl -p web result build-1 --patch
  pamctl -p web result build-1 --attempt 1 --patch | git apply",
    ),
    (
        &["events"],
        "  pamctl events
  pamctl -p web events --topic run. -f
  pamctl events --topic run.failed,worker.offline
  pamctl events --for host/alpha
  pamctl -p web events --for run/build-1 --show-output",
    ),
    (
        &["completion"],
        "  source <(pamctl completion bash)            # bash, this shell
  pamctl completion zsh > \"${fpath[1]}/_pamctl\"  # zsh
  pamctl completion fish > ~/.config/fish/completions/pamctl.fish",
    ),
    (
        &["version"],
        "  pamctl version
  pamctl version --client
  pamctl version -o json",
    ),
    (
        &["explain"],
        "  pamctl explain run
  pamctl explain run.spec.restartPolicy
  pamctl explain task --recursive",
    ),
    (&["api-resources"], "  pamctl api-resources\n  pamctl api-resources -o name"),
    (
        &["label"],
        "  pamctl -p web label task build tier=backend
  pamctl -p web label task/build tier=frontend --overwrite
  pamctl label host alpha gpu-",
    ),
    (
        &["annotate"],
        "  pamctl -p web annotate task build owner=ana
  pamctl -p web annotate run/build-1 note- ",
    ),
    (
        &["edit"],
        "  pamctl -p web edit task/build
  EDITOR=nano pamctl edit host alpha",
    ),
];

/// The examples of one verb path, if any.
pub fn for_path(path: &[&str]) -> Option<&'static str> {
    EXAMPLES
        .iter()
        .find(|(p, _)| *p == path)
        .map(|(_, text)| *text)
}

fn decorate(mut cmd: clap::Command, path: &mut Vec<String>) -> clap::Command {
    let names: Vec<String> = cmd
        .get_subcommands()
        .map(|s| s.get_name().to_string())
        .collect();
    for name in names {
        path.push(name.clone());
        cmd = cmd.mut_subcommand(&name, |sub| {
            let examples = for_path(&path.iter().map(String::as_str).collect::<Vec<_>>());
            let sub = match examples {
                Some(text) => sub.after_help(format!("Examples:\n{}", text.trim_end())),
                None => sub,
            };
            decorate(sub, path)
        });
        path.pop();
    }
    cmd
}

/// pamctl's clap command, with the examples attached.
pub fn command() -> clap::Command {
    decorate(Cli::command(), &mut Vec::new())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verbs(cmd: &clap::Command, path: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
        for sub in cmd.get_subcommands() {
            if sub.get_name() == "help" {
                continue;
            }
            path.push(sub.get_name().to_string());
            out.push(path.clone());
            verbs(sub, path, out);
            path.pop();
        }
    }

    #[test]
    fn every_verb_has_examples() {
        let cmd = command();
        let mut all = Vec::new();
        verbs(&cmd, &mut Vec::new(), &mut all);
        assert!(all.len() > 20, "{all:?}");
        for path in all {
            let refs: Vec<&str> = path.iter().map(String::as_str).collect();
            let mut sub = &cmd;
            for name in &refs {
                sub = sub.find_subcommand(name).expect("listed");
            }
            let help = sub
                .get_after_help()
                .map(|h| h.to_string())
                .unwrap_or_default();
            assert!(
                help.starts_with("Examples:\n  ") && help.contains("pamctl"),
                "`pamctl {}` has no examples",
                refs.join(" ")
            );
        }
    }

    #[test]
    fn no_examples_for_unknown_verbs() {
        let cmd = command();
        for (path, _) in EXAMPLES {
            let mut sub = &cmd;
            for name in *path {
                sub = sub
                    .find_subcommand(name)
                    .unwrap_or_else(|| panic!("examples for unknown verb {path:?}"));
            }
        }
    }
}
