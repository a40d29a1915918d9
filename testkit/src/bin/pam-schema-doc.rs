//! Prints docs/schema.md: applies the migrations to a throwaway database
//! (`testdb::fresh_pool`: `DATABASE_URL`, or the embedded test cluster) and
//! introspects it.
//!
//! `cargo run -p pam-testkit --bin pam-schema-doc > docs/schema.md`

#[tokio::main]
async fn main() {
    let result = async {
        let pool = pam_testkit::testdb::fresh_pool().await?;
        let doc =
            pam_testkit::schema_doc::generate(&pool, &pam_testkit::schema_doc::migrations_dir())
                .await?;
        pool.close().await;
        anyhow::Ok(doc)
    }
    .await;
    match result {
        Ok(doc) => print!("{doc}"),
        Err(e) => {
            eprintln!("pam-schema-doc: error: {e:#}");
            std::process::exit(1);
        }
    }
}
