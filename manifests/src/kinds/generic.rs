//! The kinds stored in the one generic table
//! ([`super::info::KindInfo::generic`]): their manifest types and the one match
//! from such a kind to its type.

use serde::{de::DeserializeOwned, Serialize};

use super::{Kind, Role};

/// The manifest type of a kind stored in the one generic table
/// ([`info::KindInfo::generic`]): pamd stores its spec as JSON and serves it
/// with no code of its own.
pub trait Generic: Serialize + DeserializeOwned + Send + Sync + 'static {
    /// Its kind.
    const KIND: Kind;
}

impl Generic for Role {
    const KIND: Kind = Kind::Role;
}

/// `for_generic_kind!(kind, T => expr)`: `expr` with `T` the manifest
/// type of `kind`, a kind stored generically — the one match from such
/// kinds to their types, for the layers that serve them generically
/// (pamd's `for_kind!` falls through to it). Any other kind is a bug: the
/// registry test walks every kind.
#[macro_export]
macro_rules! for_generic_kind {
    ($kind:expr, $t:ident => $body:expr) => {
        match $kind {
            $crate::kinds::Kind::Role => {
                type $t = $crate::kinds::Role;
                $body
            }
            k => unreachable!("{k} has a table of its own, not the generic one"),
        }
    };
}
