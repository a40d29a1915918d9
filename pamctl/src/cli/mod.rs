//! pamctl's command line (clap). Verbs follow kubectl's.

// Token and auth verbs live with their commands (cli/mod.rs stays under 600 lines).
pub use crate::cmd::token::{AuthCommand, TokenCommand};
use clap::{Args, Parser, Subcommand, ValueEnum};
use pam_manifests::protocol::SignalName;

mod get;
mod signal;

pub use get::{EventFilters, GetArgs};
pub use signal::SignalParser;

use crate::error::EXIT_CODES_HELP;

const AFTER_HELP: &str = concat!(
    "Connection: --server/--token/-p, else PAM_SERVER/PAM_TOKEN/PAM_PROJECT, else the\n",
    "config file's context (PAM_CONFIG, $XDG_CONFIG_HOME/pam/config.yaml, ~/.config/pam/config.yaml),\n",
    "else http://127.0.0.1:7700 with <data dir>/admin.token (PAM_DATA_DIR, ~/.local/share/pam).\n\n",
);

fn after_help() -> String {
    format!("{AFTER_HELP}{EXIT_CODES_HELP}")
}

/// pamctl: operate pam, the controller for AI coding-agent runs.
#[derive(Debug, Parser)]
#[command(name = "pamctl", version, after_help = after_help(), propagate_version = true)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Clone, Default, Args)]
pub struct Global {
    /// pamd's URL; several replicas comma-separated (one that cannot be
    /// connected to is skipped) [env: PAM_SERVER] [default: http://127.0.0.1:7700]
    #[arg(long, global = true, value_name = "URL")]
    pub server: Option<String>,
    /// Bearer token [env: PAM_TOKEN]
    #[arg(long, global = true, value_name = "TOKEN")]
    pub token: Option<String>,
    /// Context of the config file to use instead of its current-context
    #[arg(long, global = true, value_name = "NAME")]
    pub context: Option<String>,
    /// Project of tasks and runs (`-n` too, kubectl's namespace habit)
    /// [env: PAM_PROJECT]
    #[arg(
        short = 'p',
        long,
        global = true,
        value_name = "P",
        visible_short_alias = 'n'
    )]
    pub project: Option<String>,
    /// Trust only the CA certificates in this PEM file for an https://
    /// server [env: PAM_CA_FILE] [default: the bundled public roots]
    #[arg(long, global = true, value_name = "FILE")]
    pub ca_file: Option<std::path::PathBuf>,
}

#[derive(Debug, Args)]
pub struct FileArgs {
    /// A manifest file, a directory of *.yaml/*.yml, or - for stdin (repeatable)
    #[arg(
        short = 'f',
        long = "filename",
        value_name = "FILE|DIR|-",
        required = true
    )]
    pub files: Vec<String>,
    /// Read directories recursively
    #[arg(short = 'R', long)]
    pub recursive: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DryRun {
    /// Really apply
    None,
    /// Run everything on the server and roll back
    Server,
}

/// What apply may prune (`apply` deletes it, `diff` lists it).
#[derive(Debug, Clone, Default, Args)]
pub struct PruneArgs {
    /// Delete objects of the kinds in play that match -l/--applyset and are
    /// not in the input (diff: list them)
    #[arg(long)]
    pub prune: bool,
    /// Label selector (with --prune: which objects may be pruned)
    #[arg(short = 'l', long = "selector", value_name = "SELECTOR")]
    pub selector: Option<String>,
    /// Apply set name: labels every object and, with --prune, prunes within
    /// the set (diff: compares so, and lists what would be pruned)
    #[arg(long, value_name = "NAME")]
    pub applyset: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create or update objects from manifests (one transaction)
    Apply {
        #[command(flatten)]
        files: FileArgs,
        #[command(flatten)]
        prune: PruneArgs,
        /// --dry-run=server: validate and apply on the server, then roll back
        #[arg(long, value_enum, value_name = "MODE", num_args = 0..=1, require_equals = true,
              default_missing_value = "server", default_value = "none")]
        dry_run: DryRun,
        /// Take fields another field manager owns: another token's apply
        /// or label, a GitOps Source (it then reports drift, or puts them
        /// back with selfHeal)
        #[arg(long)]
        force_conflicts: bool,
    },
    /// Sync a GitOps Source now and wait for the result (exit 1 on Failed)
    Sync {
        /// The Source's name
        #[arg(value_name = "NAME")]
        name: String,
        /// Give up after this long (Go duration: 500ms, 30s, 1m30s, 1h)
        #[arg(long, default_value = "60s", value_name = "DURATION")]
        timeout: String,
    },
    /// Show what apply would change, as unified diffs (exit 1 when something would change);
    /// `diff source NAME [--revision REF]`: what the Source's next sync would change
    Diff {
        /// `source NAME` to preview a Source's sync instead of files
        #[arg(value_name = "source NAME", num_args = 0..=2)]
        target: Vec<String>,
        /// A manifest file, a directory of *.yaml/*.yml, or - for stdin (repeatable)
        #[arg(
            short = 'f',
            long = "filename",
            value_name = "FILE|DIR|-",
            required_unless_present = "target"
        )]
        files: Vec<String>,
        /// Read directories recursively
        #[arg(short = 'R', long)]
        recursive: bool,
        #[command(flatten)]
        prune: PruneArgs,
        /// With `source NAME`: this branch, tag or commit instead of the Source's ref
        #[arg(long, value_name = "REF", requires = "target")]
        revision: Option<String>,
        /// Show what `apply --force-conflicts` would write (fields other managers own taken)
        #[arg(long)]
        force_conflicts: bool,
    },
    /// List objects, or show some
    Get(GetArgs),
    /// The most expensive runs, tasks or projects: token usage and cost
    Top {
        /// runs, tasks or projects
        #[arg(value_name = "KIND")]
        kind: String,
        /// Tasks and runs of every project
        #[arg(short = 'A', long)]
        all_projects: bool,
        /// At most this many rows
        #[arg(long, default_value_t = 10, value_name = "N")]
        limit: usize,
    },
    /// Wait until objects meet a condition (exit 0), or time out (exit 1)
    Wait {
        /// KIND/NAME…, KIND NAME…, or KIND with -l
        #[arg(value_name = "KIND/NAME", required = true)]
        objects: Vec<String>,
        /// condition=X[=true|false], phase=Y, or delete
        #[arg(long = "for", value_name = "CONDITION")]
        for_: String,
        /// Give up after this long (Go duration: 500ms, 30s, 1m30s, 1h)
        #[arg(long, default_value = "30s", value_name = "DURATION")]
        timeout: String,
        /// Wait for every object of KIND matching this selector
        #[arg(short = 'l', long = "selector", value_name = "SELECTOR")]
        selector: Option<String>,
    },
    /// Show objects with their conditions and recent events
    Describe {
        /// KIND NAME…, or KIND/NAME…
        #[arg(value_name = "KIND[/NAME]", required = true)]
        args: Vec<String>,
    },
    /// Delete objects by name, by manifest, by label selector, or all of a kind
    Delete(DeleteArgs),
    /// Check manifests offline (no server): parsing, fields, references within the input
    Validate {
        #[command(flatten)]
        files: FileArgs,
    },
    /// Move a task through its workflow
    #[command(subcommand)]
    Task(TaskCommand),
    /// Take hosts out of dispatch and back
    #[command(subcommand)]
    Host(HostCommand),
    /// Manage API tokens
    #[command(subcommand)]
    Token(TokenCommand),
    /// Read and change pamctl's config file: its contexts (server, token, default project)
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Start a Schedule's run now
    #[command(subcommand)]
    Schedule(ScheduleCommand),
    /// Secrets' encryption key (values are set with apply, never shown)
    #[command(subcommand)]
    Secret(SecretCommand),
    /// Start runs
    #[command(subcommand)]
    Run(RunCommand),
    /// Webhook deliveries: send one again
    #[command(subcommand)]
    Webhook(WebhookCommand),
    /// Stop a run (sets spec.stopped)
    Stop { run: String },
    /// Run a finished run again: a new run RUN-r<N> with the same spec
    Rerun { run: String },
    /// Suspend a Source (no sync) or a Schedule (no tick): sets spec.suspend
    Suspend(crate::cmd::suspend::SuspendArgs),
    /// Resume a suspended Source or Schedule
    Resume(crate::cmd::suspend::SuspendArgs),
    /// Send a signal to a run's process
    Signal {
        run: String,
        /// Any case, with or without SIG (int, SIGINT)
        #[arg(long, value_parser = SignalParser)]
        signal: SignalName,
    },
    /// Attach to a live run: hold its interactive lease, stream its pane,
    /// type lines into it; Ctrl-D or Ctrl-C detaches (releases the lease)
    Attach {
        run: String,
        /// Lease time-to-live (renewed while attached; a bare number is seconds)
        #[arg(long, default_value = "30s", value_name = "DURATION")]
        ttl: String,
    },
    /// Print a run's whole log, read from the worker that keeps it
    Logs {
        run: String,
        /// Keep printing as the log grows, attempt after attempt, until the run is over for good
        #[arg(short = 'f', long)]
        follow: bool,
        /// Only the last N lines
        #[arg(long, value_name = "N")]
        tail: Option<usize>,
        /// Only what was written since then: a duration back (10m, 1h5m) or an RFC 3339 time
        #[arg(long, value_name = "DURATION")]
        since: Option<String>,
        /// This attempt's log (default: the run's current attempt)
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
        attempt: Option<u32>,
    },
    /// Print what a run's agent did: messages, tool calls and results, errors, usage
    Transcript {
        run: String,
        /// Keep printing as the agent works, attempt after attempt, until the run is over for good
        #[arg(short = 'f', long)]
        follow: bool,
        /// This attempt's transcript (default: the run's current attempt)
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
        attempt: Option<u32>,
        /// `json`: the entries as they are, one JSON object a line
        #[arg(short = 'o', long, value_name = "FORMAT")]
        output: Option<String>,
    },
    /// Print a run's workspace result: branch, commits, files changed
    Result {
        run: String,
        /// This attempt's (default: the latest with a result)
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
        attempt: Option<u32>,
        /// Print the patch (base..head), coloured on a terminal
        #[arg(long)]
        patch: bool,
    },
    /// Print the event journal
    Events {
        /// Only this topic (run.started, work_item.status_changed, run., …)
        #[arg(long, value_name = "T")]
        topic: Option<String>,
        #[command(flatten)]
        filters: EventFilters,
        /// Keep printing new events as they happen (the event stream)
        #[arg(short = 'f', long, visible_short_alias = 'w', visible_alias = "watch")]
        follow: bool,
    },
    /// Print a shell completion script (dynamic: kinds, projects and names come from the server)
    Completion {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print who the token is: its name, role and projects
    Whoami,
    /// Ask what the token may do
    #[command(subcommand)]
    Auth(AuthCommand),
    /// Print the client version and the server's
    Version {
        /// The client version only (no server contact)
        #[arg(long)]
        client: bool,
        #[arg(short = 'o', long, value_parser = ["json", "yaml"], value_name = "FORMAT")]
        output: Option<String>,
    },
    /// Document a kind or one of its fields, from the JSON Schemas
    Explain {
        /// KIND, or KIND.FIELD[.FIELD…] (run.spec.restartPolicy)
        #[arg(value_name = "KIND[.FIELD]")]
        path: String,
        /// Every field below, with its type, as a tree
        #[arg(long)]
        recursive: bool,
    },
    /// List the kinds this pamctl knows
    ApiResources {
        /// name: only the plural names
        #[arg(short = 'o', long, value_parser = ["wide", "name"], value_name = "FORMAT")]
        output: Option<String>,
        #[arg(long)]
        no_headers: bool,
    },
    /// Add, change or remove labels (k=v, k-)
    Label(MetaArgs),
    /// Add, change or remove annotations (k=v, k-)
    Annotate(MetaArgs),
    /// Edit objects in $VISUAL/$EDITOR and apply them on save
    Edit {
        /// KIND/NAME…, or KIND NAME…
        #[arg(value_name = "KIND[/NAME]", required = true)]
        args: Vec<String>,
        /// Take fields another field manager owns (another token's apply,
        /// a GitOps Source: its next sync puts them back)
        #[arg(long)]
        force_conflicts: bool,
    },
}

#[derive(Debug, Args)]
pub struct DeleteArgs {
    /// KIND NAME…, KIND/NAME…, or KIND with -l or --all (omit with -f)
    #[arg(value_name = "KIND NAME")]
    pub args: Vec<String>,
    /// Delete the objects these manifests name
    #[arg(short = 'f', long = "filename", value_name = "FILE|DIR|-")]
    pub files: Vec<String>,
    #[arg(short = 'R', long)]
    pub recursive: bool,
    /// Delete the objects of KIND matching this selector
    #[arg(short = 'l', long = "selector", value_name = "SELECTOR")]
    pub selector: Option<String>,
    /// Every object of KIND (tasks and runs: in the project); asks first on a terminal
    #[arg(long)]
    pub all: bool,
    /// An object that does not exist is not an error
    #[arg(long)]
    pub ignore_not_found: bool,
    /// Do not ask before deleting with --all
    #[arg(short = 'y', long)]
    pub yes: bool,
}

#[derive(Debug, Args)]
pub struct MetaArgs {
    /// KIND NAME… or KIND/NAME…, then KEY=VALUE to set and KEY- to remove
    #[arg(value_name = "KIND[/NAME] KEY=VALUE|KEY-", required = true)]
    pub args: Vec<String>,
    /// Replace a key that already has a different value
    #[arg(long)]
    pub overwrite: bool,
    /// Take keys another field manager owns (another token's apply, a
    /// GitOps Source: its next sync puts them back)
    #[arg(long)]
    pub force_conflicts: bool,
}

#[derive(Debug, Subcommand)]
pub enum TaskCommand {
    /// todo → doing
    Start { name: String },
    /// → done
    Done { name: String },
    /// → cancelled, cascading to non-done descendants
    Cancel {
        name: String,
        /// Do not ask before cancelling descendants too
        #[arg(short = 'y', long)]
        yes: bool,
    },
    /// → todo
    Reopen { name: String },
}

#[derive(Debug, Subcommand)]
pub enum WebhookCommand {
    /// Send a delivery again now, with the same id and body
    /// (IDs: `pamctl get webhookdeliveries`)
    Redeliver { id: String },
}

#[derive(Debug, Subcommand)]
pub enum HostCommand {
    /// Stop dispatching to this host
    Disable { name: String },
    /// Dispatch to this host again
    Enable { name: String },
    /// Accept the host's newest instance (OQ-14)
    ClearSuspect { name: String },
}

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Print the current context's name
    CurrentContext,
    /// List the contexts; the current one is marked `*`
    GetContexts {
        /// name: only the names
        #[arg(short = 'o', long, value_parser = ["name"], value_name = "FORMAT")]
        output: Option<String>,
    },
    /// Make NAME the current context
    UseContext { name: String },
    /// Create or change context NAME (the current one when omitted) from
    /// --server, --project (-p/-n), --ca-file and --token-file: only the
    /// fields given change
    SetContext {
        name: Option<String>,
        /// A file holding the bearer token (kept out of the config file)
        #[arg(long = "token-file", value_name = "FILE")]
        token_file: Option<std::path::PathBuf>,
    },
}

#[derive(Debug, Subcommand)]
pub enum ScheduleCommand {
    /// Start one run of the Schedule now (whatever its timetable, suspend and concurrency policy)
    Trigger {
        /// The Schedule's name
        name: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum SecretCommand {
    /// Make a new key current in pamd's key file and re-seal every Secret with it; old keys are dropped once nothing uses them
    RotateKey {
        /// Write no key file: re-seal every Secret with the file's current (first) key and name the old keys nothing uses any more (for a key file pamd may not write, e.g. a Kubernetes Secret: put the new key first there and roll pamd out before)
        #[arg(long)]
        reseal_only: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum RunCommand {
    /// Create a Run for a task
    Start(RunStart),
}

#[derive(Debug, Args)]
pub struct RunStart {
    #[arg(long, value_name = "T")]
    pub task: String,
    /// claude|codex|gemini|grok|exec
    #[arg(long, value_name = "P")]
    pub provider: String,
    /// Working directory on the host
    #[arg(long, value_name = "DIR")]
    pub cwd: String,
    #[arg(long)]
    pub prompt: Option<String>,
    /// Run name [default: TASK-<time>]
    #[arg(long, value_name = "N")]
    pub name: Option<String>,
    /// Run on this host only
    #[arg(long, value_name = "H", conflicts_with = "selector")]
    pub target_host: Option<String>,
    /// Run on a host with these labels (repeatable k=v)
    #[arg(long, value_name = "k=v")]
    pub selector: Vec<String>,
    #[arg(long, value_name = "N")]
    pub max_attempts: Option<u32>,
    /// exec: one argv item (repeatable); or give the command after `--`
    #[arg(
        long = "command",
        value_name = "ARG",
        conflicts_with = "args",
        allow_hyphen_values = true
    )]
    pub command: Vec<String>,
    /// exec: the command and its arguments, after `--` (kubectl-run style)
    #[arg(last = true, value_name = "COMMAND")]
    pub args: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn clap_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn every_operator_signal_is_offered_in_any_case() {
        let parse = |args: &[&str]| match Cli::try_parse_from(args).map(|c| c.command) {
            Ok(Command::Signal { signal, .. }) => Ok(signal),
            Ok(_) => unreachable!(),
            Err(e) => Err(e.to_string()),
        };
        for s in SignalName::ALL {
            assert_eq!(
                parse(&["pamctl", "signal", "r", "--signal", s.as_str()]),
                Ok(s)
            );
        }
        assert_eq!(
            parse(&["pamctl", "signal", "r", "--signal", "sigusr1"]),
            Ok(SignalName::Usr1)
        );
        assert_eq!(
            parse(&["pamctl", "signal", "r", "--signal", "int"]),
            Ok(SignalName::Int)
        );
        let e = parse(&["pamctl", "signal", "r", "--signal", "STOP"]).unwrap_err();
        assert!(
            e.starts_with("error: invalid value 'STOP' for '--signal <SIGNAL>'\n  [possible values: INT, TERM, KILL, HUP, QUIT, USR1, USR2]"),
            "{e}"
        );
    }

    #[test]
    fn dry_run_forms() {
        let parse = |args: &[&str]| match Cli::try_parse_from(args).unwrap().command {
            Command::Apply { dry_run, .. } => dry_run,
            _ => unreachable!(),
        };
        assert_eq!(parse(&["pamctl", "apply", "-f", "x"]), DryRun::None);
        assert_eq!(
            parse(&["pamctl", "apply", "-f", "x", "--dry-run=server"]),
            DryRun::Server
        );
        assert_eq!(
            parse(&["pamctl", "apply", "-f", "x", "--dry-run"]),
            DryRun::Server
        );
    }
}
