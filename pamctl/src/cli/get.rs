//! The flags of `get` (and the event filters it shares with `events`).

use clap::Args;

/// Which events `events` and `get events` print (flags of both).
#[derive(Debug, Default, Args)]
pub struct EventFilters {
    /// Events: only those about this object (run/fix-login, host/alpha)
    #[arg(long = "for", value_name = "KIND/NAME")]
    pub for_: Option<String>,
    /// Events: only these topics, comma-separated (run.failed,worker.)
    #[arg(long, value_name = "A,B", value_delimiter = ',')]
    pub types: Vec<String>,
    /// Events: include run.output_appended (hidden by default)
    #[arg(long)]
    pub show_output: bool,
    /// Events: only those of requests made with the token named NAME (the audit trail)
    #[arg(long, value_name = "NAME")]
    pub actor: Option<String>,
}

#[derive(Debug, Args)]
pub struct GetArgs {
    /// KIND [NAME…], KIND/NAME…, or KIND,KIND… (task|tasks|tk, run|runs|rn,
    /// host|hosts|ho, project|projects|proj)
    #[arg(value_name = "KIND[/NAME]", required = true)]
    pub args: Vec<String>,
    /// Label selector (app=web,tier!=db)
    #[arg(short = 'l', long = "selector", value_name = "SELECTOR")]
    pub selector: Option<String>,
    /// table, wide, yaml, json, name, jsonpath=TEMPLATE, custom-columns=HEADER:PATH,…
    #[arg(short = 'o', long, default_value = "table", value_name = "FORMAT",
          value_parser = crate::render::Output::parse)]
    pub output: crate::render::Output,
    /// Tasks and runs of every project
    #[arg(short = 'A', long)]
    pub all_projects: bool,
    /// After the list, print a line per change (from the event stream) until interrupted
    #[arg(short = 'w', long)]
    pub watch: bool,
    /// Sort by this JSONPath (.metadata.name, {.status.attempt})
    #[arg(long, value_name = "JSONPATH")]
    pub sort_by: Option<String>,
    /// Tables without the header row
    #[arg(long)]
    pub no_headers: bool,
    /// A LABELS column with every label
    #[arg(long)]
    pub show_labels: bool,
    /// A column per label key (repeatable, or comma-separated)
    #[arg(
        short = 'L',
        long = "label-columns",
        value_name = "KEY",
        value_delimiter = ','
    )]
    pub label_columns: Vec<String>,
    /// Tasks only: those waiting for a dependency that is not done
    #[arg(long)]
    pub blocked: bool,
    #[command(flatten)]
    pub events: EventFilters,
}
