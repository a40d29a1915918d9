//! pam-controller: the library behind `pamd`.
//!
//! Layout (ARCHITECTURE.md): `config` (TOML + flags), `clock` (the one
//! source of time), `embedded_pg` (the embedded PostgreSQL default), `db`
//! (migrations), `store` (the Store trait, PostgreSQL and memory
//! implementations, one conformance suite), `api` (router, error type),
//! `dashboard` (the web UI at `/`), `server` (pamd's lifecycle), `schema_doc` (docs/schema.md generator),
//! `testdb` (throwaway databases for tests).

pub mod api;
pub mod apply;
pub mod clock;
pub mod config;
pub mod dashboard;
pub mod db;
pub mod embedded_pg;
pub mod events;
pub mod local_worker;
pub mod metrics;
pub mod reconcile;
pub mod schema_doc;
pub mod server;
pub mod store;
pub mod testdb;
