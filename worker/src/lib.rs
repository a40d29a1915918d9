//! pam-worker: the host-local half of pam. It runs provider CLIs in tmux
//! sessions (through [`tmux`], the only code that shells out to tmux), wraps
//! each in [`wrap`] so every byte is logged and every lifecycle fact lands in
//! the durable [`outbox`], and reads the config from [`config`].
//!
//! [`agent`] is the long-running loop against pamd (register, heartbeat,
//! claim, desired set → tmux, shipping the outbox, snapshots).

pub mod agent;
mod backoff;
pub mod capabilities;
pub mod config;
pub mod instance;
pub mod logindex;
pub mod outbox;
pub mod output_reader;
pub mod private;
pub mod providers;
pub mod run_files;
pub mod snapshot;
pub mod spawn;
pub mod testdir;
pub mod tmux;
pub mod transcript;
pub mod workspace;
pub mod wrap;
