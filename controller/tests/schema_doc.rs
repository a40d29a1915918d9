//! docs/schema.md is generated from the migrations; this fails, printing the
//! command that regenerates it, when a migration lands without the doc.

use pam_testkit::schema_doc;

#[tokio::test]
async fn schema_doc_is_up_to_date() {
    let pool = pam_testkit::testdb::fresh_pool().await.unwrap();
    let generated = schema_doc::generate(&pool, &schema_doc::migrations_dir())
        .await
        .unwrap();
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/schema.md");
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if committed != generated {
        let first_diff = committed
            .lines()
            .zip(generated.lines())
            .position(|(a, b)| a != b)
            .map(|i| i + 1)
            .unwrap_or(committed.lines().count().min(generated.lines().count()) + 1);
        panic!(
            "docs/schema.md is stale (first difference at line {first_diff}); regenerate it with:\n\n    {}\n",
            schema_doc::REGENERATE
        );
    }
}
