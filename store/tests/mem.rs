//! The Store conformance suite against [`MemStore`].

use pam_store::memory::MemStore;

#[macro_use]
mod conformance;

store_conformance_tests!(Box::new(MemStore::new()));
