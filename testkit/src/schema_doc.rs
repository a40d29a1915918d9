//! Generates `docs/schema.md` from the database the migrations build, so
//! the doc is the schema as it exists, not as someone remembered it (the
//! agent-platform seed's practice). The tables section is read from
//! pg_catalog; only the preamble below is hand-written.
//!
//! Regenerate: [`REGENERATE`]. The `schema_doc` test fails with that
//! command whenever a migration lands without the doc.

use anyhow::Context;
use sqlx::PgPool;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

pub const REGENERATE: &str = "cargo run -p pam-testkit --bin pam-schema-doc > docs/schema.md";

const PREAMBLE: &str = "\
# Database schema

This document is generated from the migrations: `pam-schema-doc` applies every
`migrations/*.sql` to a throwaway database and introspects the result, so the
tables below are the schema as PostgreSQL reports it. Do not edit it by hand;
regenerate it:

```sh
REGENERATE_COMMAND
```

A test (`controller/tests/schema_doc.rs`) fails whenever a migration lands
without the doc being regenerated. The binding specification of the data model
is the seed (`pam-data-model.txt`); ARCHITECTURE.md says how pam extends it.

## Principles

1. **PostgreSQL is the single source of truth.** Every project, work item, run,
   host, token and event lives here; pamd holds no state that a restart would
   lose. Workers never connect to the database: all writes go through pamd.
2. **Enumerations are `TEXT` + `CHECK`**, not PostgreSQL `ENUM` types: adding a
   value must not need a type migration. The `CHECK`s say which values a
   column may hold; the state machines in `pam-manifests` are the sole gate
   for which *transitions* are legal.
3. **Tokens are stored hashed only.** `hosts.token_fingerprint` and
   `api_tokens.fingerprint` hold SHA-256 fingerprints; a raw token is never
   written to any column or log.
4. **Pane text never enters PostgreSQL.** tmux pane text, scrollback and run
   output stay on the worker (`<data_dir>/runs/`) and in pamd's in-memory
   snapshot cache; `events` payloads carry metadata only (line and byte
   counts), and are purged after `[retention] events_days` (default 30).
5. **An applied migration is never edited**; a schema change is a new file.
   `_sqlx_migrations` records what was applied, with checksums.

## Tables

Column order is physical order. Constraints and indexes are printed as
PostgreSQL reports them (`pg_get_constraintdef`, `pg_get_indexdef`), so what
you read is exactly what the database enforces. \"Defined in\" lists the
migrations that create or alter the table or index it.
";

/// The repository's `migrations/` directory.
pub fn migrations_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../migrations")
}

/// The whole markdown document for the database behind `pool`, which must
/// have exactly the migrations in `migrations_dir` applied.
pub async fn generate(pool: &PgPool, migrations_dir: &Path) -> anyhow::Result<String> {
    let migrations = read_migrations(migrations_dir)?;
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT c.relname::text FROM pg_class c \
         JOIN pg_namespace n ON n.oid = c.relnamespace \
         WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') ORDER BY c.relname",
    )
    .fetch_all(pool)
    .await
    .context("list tables")?;

    let mut out = PREAMBLE.replace("REGENERATE_COMMAND", REGENERATE);
    writeln!(out, "\n{} tables (alphabetical):\n", tables.len())?;
    for t in &tables {
        writeln!(out, "- [`{t}`](#{t})")?;
    }
    for t in &tables {
        table_section(pool, t, &migrations, &mut out).await?;
    }
    Ok(out)
}

async fn table_section(
    pool: &PgPool,
    table: &str,
    migrations: &[(String, String)],
    out: &mut String,
) -> anyhow::Result<()> {
    writeln!(out, "\n### {table}\n")?;
    let defined_in: Vec<String> = migrations
        .iter()
        .filter(|(_, sql)| defines(sql, table))
        .map(|(name, _)| format!("`migrations/{name}`"))
        .collect();
    if defined_in.is_empty() {
        writeln!(out, "Defined in: (created by the sqlx migrator)\n")?;
    } else {
        writeln!(out, "Defined in: {}\n", defined_in.join(", "))?;
    }

    let columns: Vec<(String, String, bool, Option<String>, String)> = sqlx::query_as(
        "SELECT a.attname::text, format_type(a.atttypid, a.atttypmod), a.attnotnull, \
                pg_get_expr(d.adbin, d.adrelid), a.attidentity::text \
         FROM pg_attribute a \
         LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum \
         WHERE a.attrelid = $1::text::regclass AND a.attnum > 0 AND NOT a.attisdropped \
         ORDER BY a.attnum",
    )
    .bind(format!("public.{table}"))
    .fetch_all(pool)
    .await
    .with_context(|| format!("columns of {table}"))?;
    writeln!(out, "| Column | Type | Nullable | Default |")?;
    writeln!(out, "|---|---|---|---|")?;
    for (name, ty, not_null, default, identity) in columns {
        let default = match identity.as_str() {
            "a" => "generated always as identity".to_string(),
            "d" => "generated by default as identity".to_string(),
            _ => default.map(|d| format!("`{d}`")).unwrap_or_default(),
        };
        let nullable = if not_null { "not null" } else { "null" };
        writeln!(
            out,
            "| `{name}` | {} | {nullable} | {} |",
            cell(&ty),
            cell(&default)
        )?;
    }

    let constraints: Vec<(String, String)> = sqlx::query_as(
        "SELECT conname::text, pg_get_constraintdef(oid) FROM pg_constraint \
         WHERE conrelid = $1::text::regclass \
         ORDER BY array_position(ARRAY['p','u','f','c','x','t'], contype::text), conname",
    )
    .bind(format!("public.{table}"))
    .fetch_all(pool)
    .await
    .with_context(|| format!("constraints of {table}"))?;
    if !constraints.is_empty() {
        writeln!(out, "\nConstraints:\n")?;
        for (name, def) in constraints {
            writeln!(out, "- `{name}`: `{def}`")?;
        }
    }

    let indexes: Vec<String> = sqlx::query_scalar(
        "SELECT pg_get_indexdef(i.indexrelid) FROM pg_index i \
         JOIN pg_class c ON c.oid = i.indexrelid \
         WHERE i.indrelid = $1::text::regclass ORDER BY c.relname",
    )
    .bind(format!("public.{table}"))
    .fetch_all(pool)
    .await
    .with_context(|| format!("indexes of {table}"))?;
    if !indexes.is_empty() {
        writeln!(out, "\nIndexes:\n")?;
        for def in indexes {
            writeln!(out, "- `{def}`")?;
        }
    }
    Ok(())
}

/// `(file name, text)` of every `*.sql`, in name order.
fn read_migrations(dir: &Path) -> anyhow::Result<Vec<(String, String)>> {
    let mut files = Vec::new();
    for entry in
        std::fs::read_dir(dir).with_context(|| format!("read migrations {}", dir.display()))?
    {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "sql") {
            let name = path
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            files.push((name, std::fs::read_to_string(&path)?));
        }
    }
    files.sort();
    Ok(files)
}

/// Whether `sql` creates or alters `table`, or creates an index on it:
/// the words `TABLE <table>` or `ON <table>` outside comments.
fn defines(sql: &str, table: &str) -> bool {
    let words: Vec<String> = sql
        .lines()
        .map(|l| l.split("--").next().unwrap_or(""))
        .flat_map(|l| l.split(|c: char| !(c.is_alphanumeric() || c == '_')))
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    words
        .windows(2)
        .any(|w| (w[0] == "table" || w[0] == "on") && w[1] == table)
}

fn cell(s: &str) -> String {
    s.replace('|', "\\|")
}

#[cfg(test)]
mod tests {
    use super::defines;

    #[test]
    fn defines_sees_create_alter_and_index_but_not_references_or_comments() {
        let sql = "-- ALTER TABLE ghosts\nCREATE TABLE runs (host_id UUID REFERENCES hosts(id));\n\
                   CREATE INDEX x ON work_items(path);\nALTER TABLE projects ADD COLUMN y INT;";
        assert!(defines(sql, "runs"));
        assert!(defines(sql, "work_items"));
        assert!(defines(sql, "projects"));
        assert!(!defines(sql, "hosts"));
        assert!(!defines(sql, "ghosts"));
    }
}
