//! The migrated schema holds the seed's six tables exactly as
//! pam-data-model.txt specifies them, read from the catalog (not the SQL).

use sqlx::PgPool;

async fn pool() -> PgPool {
    pam_testkit::testdb::fresh_pool().await.unwrap()
}

/// (column, type, nullable, default) in the seed's order.
type Col = (&'static str, &'static str, bool, Option<&'static str>);

async fn columns(pool: &PgPool, table: &str) -> Vec<(String, String, bool, Option<String>)> {
    sqlx::query_as(
        "SELECT column_name::text, data_type::text, is_nullable = 'YES', column_default::text \
         FROM information_schema.columns WHERE table_schema = 'public' AND table_name = $1 \
         ORDER BY ordinal_position",
    )
    .bind(table)
    .fetch_all(pool)
    .await
    .unwrap()
}

async fn assert_seed_columns(pool: &PgPool, table: &str, seed: &[Col]) {
    let actual = columns(pool, table).await;
    assert!(!actual.is_empty(), "table {table} is missing");
    for (name, ty, nullable, default) in seed {
        let col = actual
            .iter()
            .find(|c| c.0 == *name)
            .unwrap_or_else(|| panic!("{table}.{name} is missing"));
        assert_eq!(col.1, *ty, "{table}.{name} type");
        assert_eq!(col.2, *nullable, "{table}.{name} nullable");
        assert_eq!(col.3.as_deref(), *default, "{table}.{name} default");
    }
    // The seed's columns come first, in the seed's order (later migrations
    // only add columns).
    let names: Vec<&str> = actual
        .iter()
        .take(seed.len())
        .map(|c| c.0.as_str())
        .collect();
    let seed_names: Vec<&str> = seed.iter().map(|c| c.0).collect();
    assert_eq!(names, seed_names, "{table} column order");
}

const TS: &str = "timestamp with time zone";

/// The seed's tables and their columns (pam-data-model.txt).
const SEED: &[(&str, &[Col])] = &[
    (
        "hosts",
        &[
            ("id", "uuid", false, None),
            ("name", "text", false, None),
            ("platform", "text", false, None),
            ("token_fingerprint", "text", true, None),
            ("status", "text", false, None),
            ("instance_id", "uuid", true, None),
            ("instance_suspect", "boolean", false, Some("false")),
            ("instance_flagged_at", TS, true, None),
            ("last_seen_at", TS, true, None),
            ("created_at", TS, false, None),
            ("updated_at", TS, false, None),
        ],
    ),
    (
        "projects",
        &[
            ("id", "uuid", false, None),
            ("name", "text", false, None),
            ("slug", "text", false, None),
            ("description", "text", false, Some("''::text")),
            ("status", "text", false, None),
            ("created_at", TS, false, None),
            ("updated_at", TS, false, None),
        ],
    ),
    (
        "work_items",
        &[
            ("id", "uuid", false, None),
            ("project_id", "uuid", false, None),
            ("parent_id", "uuid", true, None),
            ("kind", "text", false, None),
            ("title", "text", false, None),
            ("description", "text", false, Some("''::text")),
            ("status", "text", false, None),
            ("assignee", "text", true, None),
            ("path", "text", false, None),
            ("sort_order", "integer", false, Some("0")),
            ("created_at", TS, false, None),
            ("updated_at", TS, false, None),
        ],
    ),
    (
        "runs",
        &[
            ("id", "uuid", false, None),
            ("task_id", "uuid", false, None),
            ("host_id", "uuid", true, None),
            ("provider", "text", false, None),
            ("session_name", "text", false, None),
            ("status", "text", false, None),
            ("attempt", "integer", false, Some("1")),
            ("last_progress_seq", "bigint", true, None),
            ("failure_reason", "text", true, None),
            ("pending_since", TS, false, None),
            ("cwd", "text", false, None),
            ("exit_code", "integer", true, None),
            ("started_at", TS, true, None),
            ("finished_at", TS, true, None),
            ("created_at", TS, false, None),
            ("updated_at", TS, false, None),
        ],
    ),
    (
        "processed_signals",
        &[
            ("run_id", "uuid", false, None),
            ("attempt", "integer", false, None),
            ("kind", "text", false, None),
            ("received_at", TS, false, None),
        ],
    ),
    (
        "events",
        &[
            ("seq", "bigint", false, None),
            ("topic", "text", false, None),
            ("payload", "jsonb", false, None),
            ("created_at", TS, false, None),
        ],
    ),
];

#[tokio::test]
async fn seed_tables_have_every_seed_column() {
    let pool = pool().await;
    for (table, cols) in SEED {
        assert_seed_columns(&pool, table, cols).await;
    }
}

#[tokio::test]
async fn events_seq_is_an_always_identity_primary_key() {
    let pool = pool().await;
    let (identity, generation): (String, Option<String>) = sqlx::query_as(
        "SELECT is_identity::text, identity_generation::text FROM information_schema.columns \
         WHERE table_schema = 'public' AND table_name = 'events' AND column_name = 'seq'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(identity, "YES");
    assert_eq!(generation.as_deref(), Some("ALWAYS"));
    assert_eq!(primary_key(&pool, "events").await, ["seq"]);
}

async fn primary_key(pool: &PgPool, table: &str) -> Vec<String> {
    sqlx::query_scalar(
        "SELECT a.attname::text FROM pg_constraint c \
         CROSS JOIN LATERAL unnest(c.conkey) WITH ORDINALITY AS k(attnum, n) \
         JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.attnum \
         WHERE c.conrelid = $1::text::regclass AND c.contype = 'p' ORDER BY k.n",
    )
    .bind(format!("public.{table}"))
    .fetch_all(pool)
    .await
    .unwrap()
}

#[tokio::test]
async fn primary_keys() {
    let pool = pool().await;
    for t in ["hosts", "projects", "work_items", "runs"] {
        assert_eq!(primary_key(&pool, t).await, ["id"], "{t}");
    }
    assert_eq!(
        primary_key(&pool, "processed_signals").await,
        ["run_id", "attempt", "kind"]
    );
}

/// CHECK definitions of a table, as PostgreSQL prints them.
async fn checks(pool: &PgPool, table: &str) -> Vec<String> {
    sqlx::query_scalar(
        "SELECT pg_get_constraintdef(oid) FROM pg_constraint \
         WHERE conrelid = $1::text::regclass AND contype = 'c'",
    )
    .bind(format!("public.{table}"))
    .fetch_all(pool)
    .await
    .unwrap()
}

/// The value set of `CHECK ((col = ANY (ARRAY['a'::text, …])))`.
fn value_set(checks: &[String], column: &str) -> Vec<String> {
    let prefix = format!("CHECK (({column} = ANY (ARRAY[");
    let def = checks
        .iter()
        .find(|c| c.starts_with(&prefix))
        .unwrap_or_else(|| panic!("no value-set CHECK on {column} in {checks:?}"));
    def[prefix.len()..def.find("])").unwrap()]
        .split(", ")
        .map(|v| {
            v.trim_start_matches('\'')
                .trim_end_matches("'::text")
                .to_string()
        })
        .collect()
}

#[tokio::test]
async fn checks_hold_the_seed_value_sets() {
    let pool = pool().await;
    let hosts = checks(&pool, "hosts").await;
    assert_eq!(value_set(&hosts, "platform"), ["macos", "linux"]);
    assert_eq!(
        value_set(&hosts, "status"),
        ["registered", "online", "offline", "disabled"]
    );
    let projects = checks(&pool, "projects").await;
    assert_eq!(value_set(&projects, "status"), ["active", "archived"]);
    let items = checks(&pool, "work_items").await;
    assert_eq!(
        value_set(&items, "kind"),
        ["milestone", "epic", "task", "subtask"]
    );
    assert_eq!(
        value_set(&items, "status"),
        ["todo", "doing", "done", "cancelled"]
    );
    assert!(
        items.contains(&"CHECK (((parent_id IS NULL) OR (parent_id <> id)))".to_string()),
        "hierarchy CHECK missing: {items:?}"
    );
    let runs = checks(&pool, "runs").await;
    assert_eq!(
        value_set(&runs, "status"),
        ["pending", "spawning", "running", "exited", "failed", "stopped"]
    );
}

#[tokio::test]
async fn the_hierarchy_check_rejects_self_parenting() {
    let pool = pool().await;
    let project = uuid::Uuid::new_v4();
    sqlx::query(
        "INSERT INTO projects (id, name, slug, status, created_at, updated_at) \
         VALUES ($1, 'p', 'p', 'active', now(), now())",
    )
    .bind(project)
    .execute(&pool)
    .await
    .unwrap();
    let item = uuid::Uuid::new_v4();
    let err = sqlx::query(
        "INSERT INTO work_items (id, project_id, parent_id, kind, title, status, path, name, created_at, updated_at) \
         VALUES ($1, $2, $1, 'task', 't', 'todo', 'x', 't', now(), now())",
    )
    .bind(item)
    .bind(project)
    .execute(&pool)
    .await
    .unwrap_err();
    let code = err.as_database_error().and_then(|e| e.code()).unwrap();
    assert_eq!(code, "23514", "check_violation expected: {err}");
}

/// (from columns, to table, to columns, ON DELETE) of every foreign key.
async fn foreign_keys(
    pool: &PgPool,
    table: &str,
) -> Vec<(Vec<String>, String, Vec<String>, String)> {
    let rows: Vec<(Vec<String>, String, Vec<String>, String)> = sqlx::query_as(
        "SELECT \
           ARRAY(SELECT a.attname::text FROM unnest(c.conkey) WITH ORDINALITY k(n, o) \
                 JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.n ORDER BY k.o), \
           c.confrelid::regclass::text, \
           ARRAY(SELECT a.attname::text FROM unnest(c.confkey) WITH ORDINALITY k(n, o) \
                 JOIN pg_attribute a ON a.attrelid = c.confrelid AND a.attnum = k.n ORDER BY k.o), \
           CASE c.confdeltype WHEN 'a' THEN 'NO ACTION' WHEN 'r' THEN 'RESTRICT' \
             WHEN 'c' THEN 'CASCADE' WHEN 'n' THEN 'SET NULL' WHEN 'd' THEN 'SET DEFAULT' END \
         FROM pg_constraint c WHERE c.conrelid = $1::text::regclass AND c.contype = 'f'",
    )
    .bind(format!("public.{table}"))
    .fetch_all(pool)
    .await
    .unwrap();
    rows
}

fn has_fk(
    fks: &[(Vec<String>, String, Vec<String>, String)],
    from: &str,
    to: &str,
    on_delete: &str,
) -> bool {
    fks.iter()
        .any(|(f, t, tc, d)| f == &[from] && t == to && tc == &["id"] && d == on_delete)
}

#[tokio::test]
async fn foreign_keys_and_their_on_delete() {
    let pool = pool().await;
    let items = foreign_keys(&pool, "work_items").await;
    assert!(
        has_fk(&items, "project_id", "projects", "CASCADE"),
        "{items:?}"
    );
    assert!(
        has_fk(&items, "parent_id", "work_items", "CASCADE"),
        "{items:?}"
    );
    let runs = foreign_keys(&pool, "runs").await;
    assert!(
        has_fk(&runs, "task_id", "work_items", "CASCADE"),
        "{runs:?}"
    );
    assert!(has_fk(&runs, "host_id", "hosts", "NO ACTION"), "{runs:?}");
    let signals = foreign_keys(&pool, "processed_signals").await;
    assert!(has_fk(&signals, "run_id", "runs", "CASCADE"), "{signals:?}");
}

#[tokio::test]
async fn unique_constraints() {
    let pool = pool().await;
    let uniques: Vec<(String, Vec<String>)> = sqlx::query_as(
        "SELECT c.conrelid::regclass::text, \
           ARRAY(SELECT a.attname::text FROM unnest(c.conkey) WITH ORDINALITY k(n, o) \
                 JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.n ORDER BY k.o) \
         FROM pg_constraint c JOIN pg_namespace ns ON ns.oid = c.connamespace \
         WHERE ns.nspname = 'public' AND c.contype = 'u'",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    let has = |t: &str, cols: &[&str]| uniques.iter().any(|(ut, uc)| ut == t && uc == cols);
    assert!(has("runs", &["host_id", "session_name"]), "{uniques:?}");
    assert!(has("hosts", &["name"]), "{uniques:?}");
    assert!(has("projects", &["slug"]), "{uniques:?}");
}

#[tokio::test]
async fn the_seed_indexes() {
    let pool = pool().await;
    // (index, table, key columns with opclass when not default)
    let index = |name: &'static str| {
        let pool = pool.clone();
        async move {
            let row: Option<(String, String, String)> = sqlx::query_as(
                "SELECT t.relname::text, pg_get_indexdef(i.indexrelid), am.amname::text \
                 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid \
                 JOIN pg_class t ON t.oid = i.indrelid JOIN pg_am am ON am.oid = c.relam \
                 WHERE c.relname = $1",
            )
            .bind(name)
            .fetch_optional(&pool)
            .await
            .unwrap();
            row.unwrap_or_else(|| panic!("index {name} is missing"))
        }
    };
    for (name, table, cols) in [
        ("work_items_project_id", "work_items", "(project_id)"),
        ("work_items_parent_id", "work_items", "(parent_id)"),
        ("work_items_path", "work_items", "(path text_pattern_ops)"),
        ("runs_task_id", "runs", "(task_id)"),
        ("runs_host_id", "runs", "(host_id)"),
        ("events_topic_created_at", "events", "(topic, created_at)"),
    ] {
        let (t, def, am) = index(name).await;
        assert_eq!(t, table, "{name} table");
        assert_eq!(am, "btree", "{name} method");
        assert!(
            def.ends_with(&format!("USING btree {cols}")),
            "{name}: {def}"
        );
        assert!(!def.contains("UNIQUE"), "{name} must not be unique: {def}");
    }
}
