//! Test support for pam, kept out of the production crates: throwaway
//! migrated databases ([`testdb`]), git for tests' repositories
//! ([`git`]) and the generator of `docs/schema.md` ([`schema_doc`]).
//! Binaries: `pam-testdb stop` (stops the shared test cluster; `.ci/run`
//! calls it) and `pam-schema-doc`.

pub mod git;
pub mod schema_doc;
pub mod testdb;
