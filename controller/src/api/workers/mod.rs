//! The worker protocol's transport: registration, heartbeats, signals,
//! snapshots and desired-set reads ([`worker`]) and the watch stream
//! ([`watch`]); what they answer is the fleet layer's
//! ([`crate::fleet`]).

pub mod watch;
pub mod worker;
