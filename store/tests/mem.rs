//! The Store conformance suite against [`MemStore`].

use pam_controller::store::memory::MemStore;

pam_controller::store_conformance_tests!(Box::new(MemStore::new()));
