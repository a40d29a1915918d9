//! A stored kind as the layers above the rules see it (a Kind is
//! described once and generic code serves it everywhere). [`Stored`] is
//! how to find, list and delete objects of one kind — implemented next to
//! the kind's rules — and [`super::each_kind::for_kind!`] turns a [`Kind`] value into its
//! row type, so that apply's diff and prune and the API's routes are
//! written once for every kind instead of once per kind.

use std::borrow::Cow;
use std::collections::HashSet;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use pam_manifests::Kind;
use pam_store::prelude::*;
use pam_store::{
    Host, Labels, Meta, Project, Run, RunFilter, Schedule, Secret, Source, StoreResult, Webhook,
    WorkItem,
};
use uuid::Uuid;

/// One kind's stored objects.
#[async_trait]
pub trait Stored: Sized + Send + Sync + 'static {
    /// Its row in the registry ([`Kind::info`]).
    const KIND: Kind;

    fn id(&self) -> Uuid;
    /// Its name (a project's slug).
    fn name(&self) -> &str;
    fn meta(&self) -> &Meta;
    /// The labels a selector matches (a host's include what its worker
    /// reports).
    fn labels(&self) -> Cow<'_, Labels> {
        Cow::Borrowed(&self.meta().labels)
    }

    async fn by_id(tx: &mut dyn Tx, id: Uuid) -> StoreResult<Option<Self>>;
    /// By name, in `project` for a project-scoped kind (`None` there finds
    /// nothing).
    async fn by_name(
        tx: &mut dyn Tx,
        project: Option<&Project>,
        name: &str,
    ) -> StoreResult<Option<Self>>;
    /// All of them (in `project` for a project-scoped kind), by name.
    async fn all(tx: &mut dyn Tx, project: Option<&Project>) -> StoreResult<Vec<Self>>;

    /// What deleting it would also delete, beyond the objects in
    /// `pruning`, as `kind name` (prune's no-hidden-cascade rule: the one
    /// prune keeps an object that holds others).
    async fn held(&self, _tx: &mut dyn Tx, _pruning: &HashSet<Uuid>) -> StoreResult<Vec<String>> {
        Ok(Vec::new())
    }

    /// Deletes it through its rule (and that rule's event); whether it was
    /// still there.
    async fn delete(self, tx: &mut dyn Tx, now: DateTime<Utc>) -> StoreResult<bool>;
}

/// The accessors every row shares.
macro_rules! row {
    ($kind:ident, $name:ident) => {
        const KIND: Kind = Kind::$kind;
        fn id(&self) -> Uuid {
            self.id
        }
        // A project is named by its slug (clippy reads `$name` as "name").
        #[allow(clippy::misnamed_getters)]
        fn name(&self) -> &str {
            &self.$name
        }
        fn meta(&self) -> &Meta {
            &self.meta
        }
    };
}

#[async_trait]
impl Stored for Project {
    row!(Project, slug);
    async fn by_id(tx: &mut dyn Tx, id: Uuid) -> StoreResult<Option<Self>> {
        tx.get::<Project>(id).await
    }
    async fn by_name(
        tx: &mut dyn Tx,
        _: Option<&Project>,
        slug: &str,
    ) -> StoreResult<Option<Self>> {
        tx.by_name::<Project>((), slug).await
    }
    async fn all(tx: &mut dyn Tx, _: Option<&Project>) -> StoreResult<Vec<Self>> {
        tx.list::<Project>(()).await
    }
    /// Its tasks, runs, Secrets, Schedules and objects of generically
    /// stored kinds.
    async fn held(&self, tx: &mut dyn Tx, pruning: &HashSet<Uuid>) -> StoreResult<Vec<String>> {
        let items = tx.list_work_items(self.id).await?;
        let mut held = held_by_items(tx, self.id, &items, pruning).await?;
        for s in tx.list::<Secret>(self.id).await? {
            if !pruning.contains(&s.id) {
                held.push(format!("secret {}", s.name));
            }
        }
        for s in tx.list::<Schedule>(self.id).await? {
            if !pruning.contains(&s.id) {
                held.push(format!("schedule {}", s.name));
            }
        }
        for o in tx.objects_in_project(self.id).await? {
            if !pruning.contains(&o.id) {
                held.push(format!("{} {}", o.kind.to_ascii_lowercase(), o.name));
            }
        }
        Ok(held)
    }
    async fn delete(self, tx: &mut dyn Tx, _now: DateTime<Utc>) -> StoreResult<bool> {
        super::projects::delete(tx, &self).await
    }
}

#[async_trait]
impl Stored for WorkItem {
    row!(Task, name);
    async fn by_id(tx: &mut dyn Tx, id: Uuid) -> StoreResult<Option<Self>> {
        tx.get_work_item(id).await
    }
    async fn by_name(
        tx: &mut dyn Tx,
        p: Option<&Project>,
        name: &str,
    ) -> StoreResult<Option<Self>> {
        match p {
            Some(p) => tx.get_work_item_by_name(p.id, name).await,
            None => Ok(None),
        }
    }
    async fn all(tx: &mut dyn Tx, p: Option<&Project>) -> StoreResult<Vec<Self>> {
        match p {
            Some(p) => tx.list_work_items(p.id).await,
            None => Ok(Vec::new()),
        }
    }
    /// Its subtree and their runs.
    async fn held(&self, tx: &mut dyn Tx, pruning: &HashSet<Uuid>) -> StoreResult<Vec<String>> {
        let subtree = tx.subtree(self.id).await?;
        held_by_items(tx, self.project_id, &subtree, pruning).await
    }
    async fn delete(self, tx: &mut dyn Tx, now: DateTime<Utc>) -> StoreResult<bool> {
        let slug = match tx.get::<Project>(self.project_id).await? {
            Some(p) => p.slug,
            None => return Ok(false),
        };
        super::work_items::delete(tx, &self, &slug, now).await
    }
}

#[async_trait]
impl Stored for Run {
    row!(Run, name);
    async fn by_id(tx: &mut dyn Tx, id: Uuid) -> StoreResult<Option<Self>> {
        tx.get_run(id).await
    }
    async fn by_name(
        tx: &mut dyn Tx,
        p: Option<&Project>,
        name: &str,
    ) -> StoreResult<Option<Self>> {
        match p {
            Some(p) => tx.get_run_by_name(p.id, name).await,
            None => Ok(None),
        }
    }
    async fn all(tx: &mut dyn Tx, p: Option<&Project>) -> StoreResult<Vec<Self>> {
        match p {
            Some(p) => {
                tx.list_runs(&RunFilter {
                    project_id: Some(p.id),
                    ..Default::default()
                })
                .await
            }
            None => Ok(Vec::new()),
        }
    }
    async fn delete(self, tx: &mut dyn Tx, _now: DateTime<Utc>) -> StoreResult<bool> {
        super::runs::delete(tx, &self).await
    }
}

#[async_trait]
impl Stored for Host {
    row!(Host, name);
    /// The operator's labels and the worker's namespaced ones.
    fn labels(&self) -> Cow<'_, Labels> {
        Cow::Owned(Host::labels(self))
    }
    async fn by_id(tx: &mut dyn Tx, id: Uuid) -> StoreResult<Option<Self>> {
        tx.get::<Host>(id).await
    }
    async fn by_name(
        tx: &mut dyn Tx,
        _: Option<&Project>,
        name: &str,
    ) -> StoreResult<Option<Self>> {
        tx.by_name::<Host>((), name).await
    }
    async fn all(tx: &mut dyn Tx, _: Option<&Project>) -> StoreResult<Vec<Self>> {
        tx.list::<Host>(()).await
    }
    /// The runs that reference it.
    async fn held(&self, tx: &mut dyn Tx, pruning: &HashSet<Uuid>) -> StoreResult<Vec<String>> {
        Ok(super::hosts::runs_naming(tx, self)
            .await?
            .into_iter()
            .filter(|(id, _)| !pruning.contains(id))
            .map(|(_, name)| format!("run {name}"))
            .collect())
    }
    async fn delete(self, tx: &mut dyn Tx, _now: DateTime<Utc>) -> StoreResult<bool> {
        super::hosts::delete(tx, &self).await
    }
}

/// The `Stored` impl of a kind with nothing beyond its row: found and
/// listed by name (in its project, for a project-scoped kind), deleted
/// through its rule, holding nothing.
macro_rules! simple {
    ($ty:ident, $scope:ident, delete: $delete:path, $arg:ident) => {
        #[async_trait]
        impl Stored for $ty {
            row!($ty, name);
            async fn by_id(tx: &mut dyn Tx, id: Uuid) -> StoreResult<Option<Self>> {
                tx.get::<$ty>(id).await
            }
            async fn by_name(
                tx: &mut dyn Tx,
                p: Option<&Project>,
                name: &str,
            ) -> StoreResult<Option<Self>> {
                simple!(@$scope p, Ok(None), |p| tx.by_name::<$ty>(p, name).await,
                    tx.by_name::<$ty>((), name).await)
            }
            async fn all(tx: &mut dyn Tx, p: Option<&Project>) -> StoreResult<Vec<Self>> {
                simple!(@$scope p, Ok(Vec::new()), |p| tx.list::<$ty>(p).await,
                    tx.list::<$ty>(()).await)
            }
            async fn delete(self, tx: &mut dyn Tx, _now: DateTime<Utc>) -> StoreResult<bool> {
                $delete(tx, simple!(@$arg self)).await
            }
        }
    };
    // A cluster-scoped kind ignores the project.
    (@cluster $p:ident, $none:expr, |$id:ident| $scoped:expr, $cluster:expr) => {{
        let _ = $p;
        $cluster
    }};
    // A project-scoped kind finds nothing without one.
    (@project $p:ident, $none:expr, |$id:ident| $scoped:expr, $cluster:expr) => {
        match $p {
            Some(p) => {
                let $id = p.id;
                $scoped
            }
            None => $none,
        }
    };
    (@id $o:ident) => {
        $o.id
    };
    (@row $o:ident) => {
        &$o
    };
}

simple!(Source, cluster, delete: super::sources::delete, row);
simple!(Webhook, cluster, delete: super::webhooks::delete, id);
simple!(Secret, project, delete: super::secrets::delete, id);
simple!(Schedule, project, delete: super::schedules::delete, id);

/// What deleting these work items (a subtree, or a whole project's) would
/// also delete that is not being pruned: the items themselves and their
/// runs, as `task NAME` / `run NAME`.
async fn held_by_items(
    tx: &mut dyn Tx,
    project_id: Uuid,
    items: &[WorkItem],
    pruning: &HashSet<Uuid>,
) -> StoreResult<Vec<String>> {
    let mut held: Vec<String> = items
        .iter()
        .filter(|w| !pruning.contains(&w.id))
        .map(|w| format!("task {}", w.name))
        .collect();
    let ids: HashSet<Uuid> = items.iter().map(|w| w.id).collect();
    let runs = tx
        .list_runs(&RunFilter {
            project_id: Some(project_id),
            ..Default::default()
        })
        .await?;
    held.extend(
        runs.iter()
            .filter(|r| ids.contains(&r.task_id) && !pruning.contains(&r.id))
            .map(|r| format!("run {}", r.name)),
    );
    Ok(held)
}
