//! pam-controller: the library behind `pamd`.
//!
//! # Layers
//! Imports point one way only, top to bottom (docs/architecture.md; the
//! test `tests/layers.rs` fails when a module imports a higher layer):
//!
//! ```text
//! server                         pamd's process: lifecycle, embedded PostgreSQL, local worker
//! config                         the config file and flags
//! api                            HTTP: handlers, SSE, /metrics, auth, lookups, the dashboard
//! sync                           GitOps: Sources pulled from git or a directory, applied through apply
//! reconcile | apply | fleet      the loops and signal ingest | declarative apply, diff, prune | what workers see
//! ctx                            store + clock + bus + metrics + wake-ups; commit-then-publish
//! rules                          every change to a stored object, through the gate, with its event
//! metrics                        the Prometheus registry
//! events                         the journal's topics, payloads, rendering; the bus
//! clock | batch | retry          injected time | group commit and gathered reads | a lost race run again
//! ── crates ──
//! pam-store                      Store traits per aggregate, PostgreSQL, memory, migrations
//! pam-manifests                  kinds, state machines (the sole gate), validation
//! ```
//!
//! `reconcile`, `apply` and `fleet` are siblings: none imports another.

pub mod api;
pub mod apply;
pub mod batch;
pub mod clock;
pub mod config;
pub mod ctx;
pub mod events;
pub mod fleet;
pub mod metrics;
pub mod reconcile;
pub mod retry;
pub mod rules;
pub mod server;
pub mod sync;
