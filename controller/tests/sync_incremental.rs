//! The sync's incremental path ("fast on big trees") on
//! MemStore: a watched change applies only the changed files when the last
//! sync of this process applied the tree before it; whatever a changed
//! file cannot decide alone (a removal, a duplicate) is a full sync; a
//! changed file is validated against the stored tree exactly as the whole
//! tree would be. How each sync ended is read from pamd's metrics
//! (`pam_source_sync_duration_seconds_count{result=…}`).

use std::sync::Arc;
use std::time::Duration;

use chrono::{TimeZone, Utc};
use pam_controller::apply::{self, ApplyRequest};
use pam_controller::clock::ManualClock;
use pam_controller::ctx::{Ctx, Thresholds};
use pam_controller::sync::cache::{Plan, SourceCache};
use pam_controller::sync::fetch::{self, GitAuth, Repos};
use pam_controller::sync::roots::DirPolicy;
use pam_controller::sync::runner::{sync_source, Trigger};
use pam_controller::sync::watch::{DEBOUNCE, SETTLE};
use pam_manifests::kinds::{Kind, SourceSpec, SyncState};
use pam_store::memory::MemStore;
use pam_store::{Project, Source};
use serde_json::json;

struct World {
    ctx: Ctx,
    dir: tempfile::TempDir,
    cache: SourceCache,
}

fn task(name: &str, title: &str, parent: Option<&str>) -> String {
    let parent = parent.map_or(String::new(), |p| format!("  parent: {p}\n"));
    format!(
        "---\napiVersion: pam.dev/v1\nkind: Task\nmetadata:\n  name: {name}\n  project: big\nspec:\n  title: {title}\n{parent}"
    )
}

impl World {
    async fn new() -> World {
        let clock = Arc::new(ManualClock::new(
            Utc.with_ymd_and_hms(2026, 1, 1, 12, 0, 0).unwrap(),
        ));
        let ctx = Ctx::new(Arc::new(MemStore::new()), clock, Thresholds::default());
        let dir = tempfile::tempdir().unwrap();
        let tree = dir.path().join("tree");
        std::fs::create_dir(&tree).unwrap();
        let w = World {
            ctx,
            dir,
            cache: SourceCache::default(),
        };
        w.write(
            "project.yaml",
            "apiVersion: pam.dev/v1\nkind: Project\nmetadata: {name: big}\nspec: {}\n",
        );
        w.write(
            "a.yaml",
            &(task("a1", "A one", None) + &task("a2", "A two", Some("a1"))),
        );
        w.write(
            "b.yaml",
            &(task("b1", "B one", Some("a1")) + &task("b2", "B two", None)),
        );
        let source = json!({"apiVersion": "pam.dev/v1", "kind": "Source",
            "metadata": {"name": "big"},
            "spec": {"path": tree.display().to_string(), "interval": "1h", "projects": ["big"]}});
        apply::apply(
            &w.ctx,
            &ApplyRequest {
                objects: vec![source],
                ..Default::default()
            },
        )
        .await
        .unwrap();
        w
    }

    fn tree(&self) -> std::path::PathBuf {
        self.dir.path().join("tree")
    }

    fn write(&self, name: &str, text: &str) {
        std::fs::write(self.tree().join(name), text).unwrap();
    }

    async fn source(&self) -> Source {
        let mut tx = self.ctx.store.begin().await.unwrap();
        tx.by_name::<Source>((), "big").await.unwrap().unwrap()
    }

    /// What the cache would do with the tree as it is now.
    async fn plan(&mut self) -> Plan {
        let s = self.source().await;
        let tree = fetch::read_dir(&self.tree()).unwrap();
        let loaded = self.cache.load(&tree, None);
        let revision = s.status.revision.clone().unwrap_or_default();
        self.cache
            .plan(&tree, &loaded, &revision, s.meta.generation)
    }

    async fn sync(&mut self, trigger: Trigger) -> Source {
        self.try_sync(trigger).await.expect("synced, not deferred")
    }

    /// Syncs and expects the sync to end `want`.
    async fn sync_to(&mut self, trigger: Trigger, want: SyncState) -> Source {
        let s = self.sync(trigger).await;
        assert_eq!(s.status.sync, want, "{:?}", s.status);
        s
    }

    /// None: deferred (the tree is still settling).
    async fn try_sync(&mut self, trigger: Trigger) -> Option<Source> {
        let s = self.source().await;
        let spec: SourceSpec = serde_json::from_value(s.meta.spec.clone()).unwrap();
        let data = self.dir.path().join("data");
        // The tree is beside the data dir: allowed; no settle window (the
        // tests sync right after writing, each file closed).
        let dirs = DirPolicy::new(&data, &[self.dir.path().to_path_buf()], Duration::ZERO);
        let repos = Repos::new(&data, GitAuth::default()).with_dirs(dirs);
        sync_source(&self.ctx, &repos, s, &spec, &mut self.cache, trigger)
            .await
            .unwrap()
    }

    /// How many syncs ended as `result`, from pamd's metrics.
    async fn syncs(&self, result: &str) -> u64 {
        let text = self.ctx.metrics.render(self.ctx.store.as_ref()).await;
        let key = format!("pam_source_sync_duration_seconds_count{{result=\"{result}\"}} ");
        text.lines()
            .find_map(|l| l.strip_prefix(&key))
            .map_or(0, |n| n.trim().parse().unwrap())
    }

    async fn title(&self, name: &str) -> Option<String> {
        let mut tx = self.ctx.store.begin().await.unwrap();
        let p = tx.by_name::<Project>((), "big").await.unwrap()?;
        let w = tx.get_work_item_by_name(p.id, name).await.unwrap()?;
        Some(w.title)
    }
}

/// A watched change, the tree still for long enough for any sync.
const CHANGED: Trigger = Trigger::Changed { still: DEBOUNCE };
/// A watched change that completed its files just now.
const JUST_CHANGED: Trigger = Trigger::Changed { still: SETTLE };

/// Only `files` changed, and of their objects only these tasks.
fn changed(files: &[&str], tasks: &[&str]) -> Plan {
    Plan::Changed {
        files: files.iter().map(|s| s.to_string()).collect(),
        objects: tasks
            .iter()
            .map(|t| (Kind::Task, Some("big".to_string()), t.to_string()))
            .collect(),
    }
}

#[tokio::test]
async fn a_changed_file_alone_is_applied() {
    let mut w = World::new().await;
    assert_eq!(w.plan().await, Plan::Full, "nothing applied yet");
    w.sync_to(Trigger::Due, SyncState::Synced).await;
    assert_eq!(w.syncs("full").await, 1);
    assert_eq!(w.title("b1").await.as_deref(), Some("B one"));

    // One task's title in one file.
    w.write(
        "b.yaml",
        &(task("b1", "B one again", Some("a1")) + &task("b2", "B two", None)),
    );
    assert_eq!(w.plan().await, changed(&["b.yaml"], &["b1"]));
    // An edit is applied as soon as the file is complete.
    let s = w.sync_to(JUST_CHANGED, SyncState::Synced).await;
    assert_eq!(w.syncs("changed").await, 1);
    assert_eq!(w.syncs("full").await, 1);
    assert_eq!(w.title("b1").await.as_deref(), Some("B one again"));
    let tree = fetch::read_dir(&w.tree()).unwrap();
    assert_eq!(s.status.revision.as_deref(), Some(tree.revision.as_str()));

    // A new file whose task's parent is in a file that did not change.
    w.write("c.yaml", &task("c1", "C one", Some("a2")));
    assert_eq!(w.plan().await, changed(&["c.yaml"], &["c1"]));
    let s = w.sync_to(CHANGED, SyncState::Synced).await;
    assert_eq!(w.syncs("changed").await, 2);
    assert_eq!(w.title("c1").await.as_deref(), Some("C one"));
    let n = {
        let mut tx = w.ctx.store.begin().await.unwrap();
        tx.list_source_objects(s.id).await.unwrap().len()
    };
    assert_eq!(n, 6, "project, a1, a2, b1, b2, c1 in the inventory");

    // The interval's sync is a full one (it looks for drift).
    w.sync_to(Trigger::Due, SyncState::Synced).await;
    assert_eq!(w.syncs("unchanged").await, 1);
}

#[tokio::test]
async fn what_a_changed_file_cannot_decide_alone_is_a_full_sync() {
    let mut w = World::new().await;
    w.sync(Trigger::Due).await;

    // A task declared twice (in a changed file and an unchanged one): the
    // full sync names the problem, nothing is written.
    w.write("c.yaml", &task("a1", "A again", None));
    assert_eq!(w.plan().await, Plan::Full);
    let s = w.sync_to(CHANGED, SyncState::Failed).await;
    assert!(
        s.status.sync_message.contains("a1"),
        "{}",
        s.status.sync_message
    );
    assert_eq!(w.title("a1").await.as_deref(), Some("A one"));
    std::fs::remove_file(w.tree().join("c.yaml")).unwrap();
    // Failed: the next sync is a full one.
    assert_eq!(w.plan().await, Plan::Full);
    w.sync_to(CHANGED, SyncState::Synced).await;

    // A file removed: its objects leave the tree and are pruned, which
    // only the full sync decides — once the tree has been still for
    // DEBOUNCE, never half-way through a burst of changes.
    std::fs::remove_file(w.tree().join("b.yaml")).unwrap();
    assert_eq!(w.plan().await, Plan::Full);
    assert!(w.try_sync(JUST_CHANGED).await.is_none(), "deferred");
    assert_eq!(w.title("b1").await.as_deref(), Some("B one"), "not yet");
    let full = w.syncs("full").await;
    w.sync_to(CHANGED, SyncState::Synced).await;
    assert_eq!(w.syncs("full").await, full + 1);
    assert_eq!(w.title("b1").await, None, "pruned");
    assert_eq!(w.title("b2").await, None, "pruned");
    assert_eq!(w.title("a2").await.as_deref(), Some("A two"));

    // A task moved to another file is no removal.
    w.write("a.yaml", &task("a1", "A one", None));
    w.write("d.yaml", &task("a2", "A two moved", Some("a1")));
    assert_eq!(w.plan().await, changed(&["a.yaml", "d.yaml"], &["a2"]));
    w.sync(CHANGED).await;
    assert_eq!(w.title("a2").await.as_deref(), Some("A two moved"));
    // Nor is a file renamed: what it declared is still declared (and is
    // written again: its inventory names the new file).
    std::fs::rename(w.tree().join("d.yaml"), w.tree().join("e.yaml")).unwrap();
    assert_eq!(w.plan().await, changed(&["e.yaml"], &["a2"]));
    let changed = w.syncs("changed").await;
    let s = w.sync_to(CHANGED, SyncState::Synced).await;
    assert_eq!(w.syncs("changed").await, changed + 1);
    assert_eq!(w.title("a2").await.as_deref(), Some("A two moved"));
    let mut tx = w.ctx.store.begin().await.unwrap();
    let inv = tx.list_source_objects(s.id).await.unwrap();
    let a2 = inv.iter().find(|o| o.name == "a2").unwrap();
    assert_eq!(a2.file, "e.yaml");
}

#[tokio::test]
async fn a_changed_file_is_validated_against_the_stored_tree() {
    let mut w = World::new().await;
    w.sync(Trigger::Due).await;
    let applied = w.source().await.status.revision;

    // a1 under b1, which is under a1: a cycle through a file that did not
    // change.
    w.write(
        "a.yaml",
        &(task("a1", "A one", Some("b1")) + &task("a2", "A two", Some("a1"))),
    );
    assert_eq!(w.plan().await, changed(&["a.yaml"], &["a1"]));
    let s = w.sync_to(CHANGED, SyncState::Failed).await;
    let err = &s.status.errors[0];
    assert_eq!(err["file"], "a.yaml", "{err}");
    assert!(err["line"].as_u64().is_some(), "{err}");
    assert_eq!(s.status.revision, applied, "the last good revision stays");
    assert_eq!(w.syncs("failed").await, 1);

    // An unknown parent.
    w.write(
        "a.yaml",
        &(task("a1", "A one", None) + &task("a2", "A two", Some("nope"))),
    );
    let s = w.sync_to(CHANGED, SyncState::Failed).await;
    assert_eq!(s.status.errors[0]["file"], "a.yaml");
    assert!(
        s.status.sync_message.contains("nope"),
        "{}",
        s.status.sync_message
    );

    // Put back: synced again, nothing of the bad revisions written.
    w.write(
        "a.yaml",
        &(task("a1", "A one", None) + &task("a2", "A two", Some("a1"))),
    );
    let s = w.sync_to(CHANGED, SyncState::Synced).await;
    assert_eq!(s.status.revision, applied);
    let mut tx = w.ctx.store.begin().await.unwrap();
    let p = tx.by_name::<Project>((), "big").await.unwrap().unwrap();
    let a1 = tx.get_work_item_by_name(p.id, "a1").await.unwrap().unwrap();
    assert_eq!(a1.parent_id, None);
    assert_eq!(a1.meta.generation, 1, "never written");
}
