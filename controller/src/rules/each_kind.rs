//! One kind's code, for a kind known only at run time: the `match` from
//! [`pam_manifests::Kind`] to the type that implements
//! [`super::kind::Stored`] for it.

/// `for_kind!(kind, K => expr)`: `expr` with `K` the row type of `kind`
/// (a `Kind` value) — the one `match` from kinds with a table of their
/// own to their row types; every other kind is stored generically
/// and its `K` is [`super::objects::GenericObject`] of its manifest type
/// (`pam_manifests::for_generic_kind!`).
macro_rules! for_kind {
    ($kind:expr, $k:ident => $body:expr) => {
        $crate::rules::each_kind::for_kind!(@rows $kind, $k, $body;
            Project: Project, Task: WorkItem, Run: Run, Host: Host, Source: Source,
            Webhook: Webhook, Secret: Secret, Schedule: Schedule)
    };
    (@rows $kind:expr, $k:ident, $body:expr; $($variant:ident: $row:ident),+) => {
        match $kind {
            $(pam_manifests::Kind::$variant => {
                type $k = pam_store::$row;
                $body
            })+
            generic => pam_manifests::for_generic_kind!(generic, M => {
                type $k = $crate::rules::objects::GenericObject<M>;
                $body
            }),
        }
    };
}
pub(crate) use for_kind;

#[cfg(test)]
mod tests {
    use super::super::kind::Stored;
    use pam_manifests::kinds::info::KINDS;

    /// `for_kind!` maps every kind of the registry to a row type whose
    /// `Stored::KIND` is that kind.
    #[test]
    fn for_kind_maps_every_kind_to_its_own_row() {
        for info in &KINDS {
            let k = for_kind!(info.kind, K => <K as Stored>::KIND);
            assert_eq!(k, info.kind, "{}", info.name);
        }
    }
}
