//! pam-controller: the library behind `pamd`.
//!
//! Layout (ARCHITECTURE.md): `store` (the Store trait, PostgreSQL and memory
//! implementations, one conformance suite), `db` (migrations), `testdb`
//! (throwaway databases for tests).

pub mod apply;
pub mod clock;
pub mod db;
pub mod events;
pub mod reconcile;
pub mod store;
pub mod testdb;
