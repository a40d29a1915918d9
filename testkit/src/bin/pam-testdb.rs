//! Manages the shared embedded PostgreSQL that tests use when
//! `DATABASE_URL` is unset (see `pam_testkit::testdb`).
//!
//! - `pam-testdb url`  — start it if needed; print its admin URL
//!   (`psql "$(pam-testdb url)"`).
//! - `pam-testdb fresh` — start it if needed; print the URL of a fresh,
//!   migrated, empty database on it (the browser tests start pamd on one).
//! - `pam-testdb stop` — stop it (`.ci/run` does this at the end).

fn main() {
    let cmd = std::env::args().nth(1).unwrap_or_default();
    let result = match cmd.as_str() {
        "url" => pam_testkit::testdb::start_test_cluster().map(|url| println!("{url}")),
        "fresh" => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(anyhow::Error::from)
            .and_then(|rt| rt.block_on(pam_testkit::testdb::fresh_database_url()))
            .map(|url| println!("{url}")),
        "stop" => pam_testkit::testdb::stop_test_cluster(),
        _ => {
            eprintln!("usage: pam-testdb url|fresh|stop");
            std::process::exit(2);
        }
    };
    if let Err(e) = result {
        eprintln!("pam-testdb: error: {e:#}");
        std::process::exit(1);
    }
}
