//! What every map of named objects shares in the memory store (issue 29:
//! written once, as `postgres/named.rs` is for the tables): the insert's
//! key checks, by name in its scope, all of a scope in name order.

use super::*;

/// A map of named objects in the store's [`State`].
pub(super) trait Named: Clone {
    /// The table's name, for the constraint names PostgreSQL reports.
    const TABLE: &'static str;
    /// The unique-name constraint (`<table>_project_id_name_key`,
    /// `<table>_name_key`, `projects_slug_key`).
    const NAME_KEY: &'static str;
    fn map(s: &State) -> &HashMap<Uuid, Self>;
    fn map_mut(s: &mut State) -> &mut HashMap<Uuid, Self>;
    fn id(&self) -> Uuid;
    /// The project its name is unique in; `None` for cluster-wide kinds.
    fn scope(&self) -> Option<Uuid>;
    /// Its name (a project's slug).
    fn key(&self) -> &str;
    fn meta(&self) -> &crate::Meta;
    fn meta_mut(&mut self) -> &mut crate::Meta;
    fn updated_at(&self) -> DateTime<Utc>;
    fn updated_at_mut(&mut self) -> &mut DateTime<Utc>;
}

impl State {
    /// Inserts `x` after PostgreSQL's checks: its project exists (a
    /// project-scoped kind), its id and its name (in its scope) are free.
    pub(super) fn insert_named<T: Named>(&mut self, x: &T) -> StoreResult<()> {
        if let Some(p) = x.scope() {
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
    /// stored object at another version is a `Conflict` naming `what`.
    pub(super) fn update_named<T: Named>(
        &mut self,
        x: &T,
        expected_rv: i64,
        what: impl std::fmt::Display,
        also: impl FnOnce(&mut T, &T) -> StoreResult<()>,
    ) -> StoreResult<T> {
        let cur = self.named_mut::<T>(x.id())?;
        let rv = cur.meta().resource_version;
        if rv != expected_rv {
            return Err(conflict(format!(
                "{what} is not at resource version {expected_rv}"
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
            .filter(|x| x.scope() == Some(project))
            .map(T::id)
            .collect()
    }

    /// The object named `name` in `scope`.
    pub(super) fn named<T: Named>(&self, scope: Option<Uuid>, name: &str) -> Option<T> {
        T::map(self)
            .values()
            .find(|x| x.scope() == scope && x.key() == name)
            .cloned()
    }

    /// Every object of `scope`, by name (byte order, as PostgreSQL's
    /// `COLLATE "C"`).
    pub(super) fn all_named<T: Named>(&self, scope: Option<Uuid>) -> Vec<T> {
        let mut v: Vec<T> = T::map(self)
            .values()
            .filter(|x| x.scope() == scope)
            .cloned()
            .collect();
        v.sort_by(|a, b| a.key().cmp(b.key()));
        v
    }
}

/// `named!(Type, state_field, "table", "name_key", name_field, |x| scope)`:
/// a kind's [`Named`] impl, invoked in its own module.
macro_rules! named {
    ($ty:ty, $field:ident, $table:literal, $key:literal, $name:ident, |$x:ident| $scope:expr) => {
        impl super::named::Named for $ty {
            const TABLE: &'static str = $table;
            const NAME_KEY: &'static str = $key;
            fn map(s: &super::State) -> &HashMap<Uuid, Self> {
                &s.$field
            }
            fn map_mut(s: &mut super::State) -> &mut HashMap<Uuid, Self> {
                &mut s.$field
            }
            fn id(&self) -> Uuid {
                self.id
            }
            fn scope(&self) -> Option<Uuid> {
                let $x = self;
                $scope
            }
            fn key(&self) -> &str {
                &self.$name
            }
            fn meta(&self) -> &crate::Meta {
                &self.meta
            }
            fn meta_mut(&mut self) -> &mut crate::Meta {
                &mut self.meta
            }
            fn updated_at(&self) -> DateTime<Utc> {
                self.updated_at
            }
            fn updated_at_mut(&mut self) -> &mut DateTime<Utc> {
                &mut self.updated_at
            }
        }
    };
}
pub(super) use named;
