//! GitOps: Sources — desired state pulled from a directory on pamd's host
//! or a git repository, validated whole and applied as an applyset the
//! Source owns (ARCHITECTURE.md, "Sources").

pub mod fetch;
pub mod ownership;
