//! GitOps: Sources — desired state pulled from a directory on pamd's host
//! or a git repository, validated whole and applied as an applyset the
//! Source owns (ARCHITECTURE.md, "Sources"; docs/gitops.md).
//!
//! [`tree`] reads a directory's tree, [`fetch`] a git revision's; [`apply`] applies one tree in the
//! caller's transaction (merge with what operators own, inventory,
//! prune); [`runner`] is pamd's loop that decides when, woken by
//! [`watch`] when a watched directory changes. Ownership and
//! drift live in [`crate::apply::ownership`], shared with the push side.

pub mod apply;
pub mod cache;
pub mod fetch;
pub mod health;
pub mod objects;
pub mod preview;
pub mod roots;
pub mod runner;
pub mod settle;
mod status;
pub mod substitute;
pub mod tree;
pub mod watch;
