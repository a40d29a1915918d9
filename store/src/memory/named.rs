//! What every map of named objects shares in the memory store (written once, as
//! `postgres/named.rs` is for the tables): the
//! [`NamedTx`] calls of every kind with a map of its own, and the key
//! checks, reads and writes the other named kinds (tasks, runs) use too.

use super::*;
use crate::named::Row;
use crate::{NamedKind, NamedTx};

/// A map of named objects in the store's [`State`].
pub(super) trait Named: NamedKind {
    /// The table's name, for the constraint names PostgreSQL reports.
    const TABLE: &'static str;
    /// The unique-name constraint (`<table>_project_id_name_key`,
    /// `<table>_name_key`, `projects_slug_key`).
    const NAME_KEY: &'static str;
    fn map(s: &State) -> &HashMap<Uuid, Self>;
    fn map_mut(s: &mut State) -> &mut HashMap<Uuid, Self>;
    /// The project it belongs to (that must exist); `None` for
    /// cluster-wide kinds.
    fn project(&self) -> Option<Uuid>;
    /// Its name (a project's slug).
    fn key(&self) -> &str;
}

/// A kind whose calls are all [`NamedTx`]'s: what its insert, update and
/// delete do beyond what every named object has.
pub(super) trait Table: Named {
    /// The table's CHECK constraints.
    fn check(&self) -> StoreResult<()> {
        Ok(())
    }
    /// The object as an insert stores it (columns the table's defaults
    /// fill).
    fn inserted(&self) -> Self {
        self.clone()
    }
    /// Copies the kind's own columns an update writes.
    fn copy_own(&mut self, _from: &Self) {}
    /// What deleting object `id` also deletes (the foreign keys'
    /// cascades), or refuses (a reference without one), before it goes.
    fn on_delete(_s: &mut State, _id: Uuid) -> StoreResult<()> {
        Ok(())
    }
}

#[async_trait]
impl<K: Table> NamedTx<K> for MemTx {
    async fn named_insert(&mut self, x: &K) -> StoreResult<()> {
        x.check()?;
        self.work.insert_named(&x.inserted())
    }

    async fn named_get(&mut self, id: Uuid) -> StoreResult<Option<K>> {
        Ok(self.work.by_id(id))
    }

    async fn named_by_name(&mut self, scope: K::Scope, name: &str) -> StoreResult<Option<K>> {
        Ok(self.work.named(scope, name))
    }

    async fn named_list(&mut self, scope: K::Scope) -> StoreResult<Vec<K>> {
        Ok(self.work.all_named(scope))
    }

    async fn named_update(&mut self, x: &K, expected_rv: i64) -> StoreResult<K> {
        self.work.update_named(x, expected_rv, |cur: &mut K, x| {
            x.check()?;
            cur.copy_own(x);
            Ok(())
        })
    }

    async fn named_delete(&mut self, id: Uuid) -> StoreResult<bool> {
        if !K::map(&self.work).contains_key(&id) {
            return Ok(false);
        }
        K::on_delete(&mut self.work, id)?;
        K::map_mut(&mut self.work).remove(&id);
        Ok(true)
    }
}

impl State {
    /// Inserts `x` after PostgreSQL's checks: its project exists (a
    /// project-scoped kind), its id and its name (in its scope) are free.
    pub(super) fn insert_named<T: Named>(&mut self, x: &T) -> StoreResult<()> {
        if let Some(p) = x.project() {
            if !self.projects.contains_key(&p) {
                return Err(StoreError::NotFound(format!(
                    "referenced row (project {p})"
                )));
            }
        }
        let map = T::map(self);
        if map.contains_key(&x.id()) {
            return Err(StoreError::AlreadyExists(format!("{}_pkey", T::TABLE)));
        }
        if map
            .values()
            .any(|o| o.scope() == x.scope() && o.key() == x.key())
        {
            return Err(StoreError::AlreadyExists(T::NAME_KEY.into()));
        }
        T::map_mut(self).insert(x.id(), x.clone());
        Ok(())
    }

    /// The object with this id.
    pub(super) fn by_id<T: Named>(&self, id: Uuid) -> Option<T> {
        T::map(self).get(&id).cloned()
    }

    /// The object with this id to change in place (PostgreSQL's `NotFound`
    /// when there is none).
    pub(super) fn named_mut<T: Named>(&mut self, id: Uuid) -> StoreResult<&mut T> {
        T::map_mut(self)
            .get_mut(&id)
            .ok_or_else(|| not_found(T::TABLE, id))
    }

    /// The guarded update every named kind shares (PostgreSQL's `UPDATE …
    /// WHERE resource_version = $expected`): `x`'s metadata and
    /// `updated_at`, and what `also` copies of its own columns, written
    /// over the stored object at `expected_rv`; the version bumped. A
    /// stored object at another version is a `Conflict` naming it.
    pub(super) fn update_named<T: Named>(
        &mut self,
        x: &T,
        expected_rv: i64,
        also: impl FnOnce(&mut T, &T) -> StoreResult<()>,
    ) -> StoreResult<T> {
        let cur = self.named_mut::<T>(x.id())?;
        let rv = cur.meta().resource_version;
        if rv != expected_rv {
            return Err(conflict(format!(
                "{} is not at resource version {expected_rv}",
                x.what()
            )));
        }
        also(cur, x)?;
        *cur.meta_mut() = x.meta().clone();
        cur.meta_mut().resource_version = rv + 1;
        *cur.updated_at_mut() = x.updated_at();
        Ok(cur.clone())
    }

    /// The status change every kind with a state machine shares (PostgreSQL's
    /// `UPDATE … WHERE status = $from`): `Conflict` naming `what` when the
    /// object is not in `from`.
    pub(super) fn set_named_status<T: Named, S: PartialEq + Copy + std::fmt::Display>(
        &mut self,
        id: Uuid,
        status: impl FnOnce(&mut T) -> &mut S,
        (from, to): (S, S),
        now: DateTime<Utc>,
        what: impl std::fmt::Display,
    ) -> StoreResult<T> {
        let cur = self.named_mut::<T>(id)?;
        let st = status(cur);
        if *st != from {
            return Err(conflict(format!("{what} {id} is not {from}")));
        }
        *st = to;
        *cur.updated_at_mut() = now;
        cur.meta_mut().resource_version += 1;
        Ok(cur.clone())
    }

    /// The ids of every object of a project-scoped kind in `project`.
    pub(super) fn ids_in<T: Named>(&self, project: Uuid) -> BTreeSet<Uuid> {
        T::map(self)
            .values()
            .filter(|x| x.project() == Some(project))
            .map(Row::id)
            .collect()
    }

    /// The object named `name` in `scope`.
    pub(super) fn named<T: Named>(&self, scope: T::Scope, name: &str) -> Option<T> {
        T::map(self)
            .values()
            .find(|x| x.scope() == scope && x.key() == name)
            .cloned()
    }

    /// Every object of `scope`, by name (byte order, as PostgreSQL's
    /// `COLLATE "C"`).
    pub(super) fn all_named<T: Named>(&self, scope: T::Scope) -> Vec<T> {
        let mut v: Vec<T> = T::map(self)
            .values()
            .filter(|x| x.scope() == scope)
            .cloned()
            .collect();
        v.sort_by(|a, b| a.key().cmp(b.key()));
        v
    }
}

/// `named!(Type, state_field, "table", "name_key", name_field, |x| project)`:
/// a kind's [`Named`] impl, invoked in its own module.
macro_rules! named {
    ($ty:ty, $field:ident, $table:literal, $key:literal, $name:ident, |$x:ident| $project:expr) => {
        impl super::named::Named for $ty {
            const TABLE: &'static str = $table;
            const NAME_KEY: &'static str = $key;
            fn map(s: &super::State) -> &HashMap<Uuid, Self> {
                &s.$field
            }
            fn map_mut(s: &mut super::State) -> &mut HashMap<Uuid, Self> {
                &mut s.$field
            }
            fn project(&self) -> Option<Uuid> {
                let $x = self;
                $project
            }
            fn key(&self) -> &str {
                &self.$name
            }
        }
    };
}
pub(super) use named;
