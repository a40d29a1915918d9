//! Secrets on MemStore: applied values sealed and printed as
//! keys only, bad Secrets and references refused with file:line and
//! nothing written, a run waiting for a missing Secret released once it
//! is applied, the environment an attempt gets, rotation.

use std::sync::Arc;

use chrono::{TimeZone, Utc};
use pam_controller::apply::{self, Action, ApplyError, ApplyRequest, FileIn};
use pam_controller::clock::ManualClock;
use pam_controller::ctx::{Ctx, Thresholds};
use pam_controller::fleet::claims;
use pam_controller::reconcile;
use pam_controller::rules::runs::env;
use pam_controller::rules::secrets;
use pam_manifests::state::Platform;
use pam_store::memory::MemStore;
use pam_store::{Host, Project, Run, Secret};
use uuid::Uuid;

const VALUE: &str = "sk-live-0123456789abcdef";

const BASE: &str = "apiVersion: pam.dev/v1\nkind: Project\nmetadata:\n  name: web\nspec: {}\n---\n\
apiVersion: pam.dev/v1\nkind: Project\nmetadata:\n  name: other\nspec: {}\n---\n\
apiVersion: pam.dev/v1\nkind: Task\nmetadata:\n  name: t\n  project: web\nspec:\n  title: t\n";

fn secret(value: &str) -> String {
    format!("apiVersion: pam.dev/v1\nkind: Secret\nmetadata:\n  name: keys\n  project: web\nspec:\n  stringData:\n    TOKEN: {value}\n    PLAIN: visible\n")
}

fn run(name: &str, key: &str) -> String {
    format!(
        "apiVersion: pam.dev/v1\nkind: Run\nmetadata:\n  name: {name}\n  project: web\nspec:\n  task: t\n  provider: claude\n  cwd: /tmp\n  env:\n  - name: API_KEY\n    valueFrom:\n      secretKeyRef:\n        name: keys\n        key: {key}\n  - name: LITERAL\n    value: lit\n"
    )
}

fn ctx() -> Ctx {
    let clock = Arc::new(ManualClock::new(
        Utc.with_ymd_and_hms(2026, 1, 1, 12, 0, 0).unwrap(),
    ));
    Ctx::new(Arc::new(MemStore::new()), clock, Thresholds::default())
}

async fn apply(ctx: &Ctx, text: &str) -> Result<Vec<apply::ApplyResult>, ApplyError> {
    let req = ApplyRequest {
        files: vec![FileIn {
            name: "s.yaml".into(),
            content: text.into(),
        }],
        ..Default::default()
    };
    apply::apply(ctx, &req).await
}

async fn host(ctx: &Ctx) -> Host {
    let now = ctx.now();
    let h = Host::new("h".into(), Platform::Linux, now);
    let mut tx = ctx.store.begin().await.unwrap();
    tx.insert(&h).await.unwrap();
    let (h, _) = pam_controller::rules::hosts::present(
        tx.as_mut(),
        h,
        Some(Uuid::new_v4()),
        ctx.thresholds.offline_after,
        now,
    )
    .await
    .unwrap();
    ctx.commit(tx).await.unwrap();
    h
}

async fn stored_run(ctx: &Ctx, name: &str) -> Run {
    let mut tx = ctx.store.begin().await.unwrap();
    let p = tx.by_name::<Project>((), "web").await.unwrap().unwrap();
    tx.get_run_by_name(p.id, name).await.unwrap().unwrap()
}

#[tokio::test]
async fn values_are_sealed_printed_as_keys_and_reapply_is_unchanged() {
    let ctx = ctx();
    apply(&ctx, BASE).await.unwrap();
    let r = apply(&ctx, &secret(VALUE)).await.unwrap();
    assert_eq!(r[0].action, Action::Created);
    let mut tx = ctx.store.begin().await.unwrap();
    let p = tx.by_name::<Project>((), "web").await.unwrap().unwrap();
    let row = tx.by_name::<Secret>(p.id, "keys").await.unwrap().unwrap();
    let stored = format!("{:?} {} {:?}", row.meta, row.meta.spec, row.ciphertext);
    assert!(!stored.contains(VALUE));
    assert!(!row
        .ciphertext
        .windows(VALUE.len())
        .any(|w| w == VALUE.as_bytes()));
    assert_eq!(row.key_id, ctx.secrets.current_id());
    let printed = pam_controller::api::operator::objects::secret(&row, "web").to_string();
    assert!(
        !printed.contains(VALUE) && !printed.contains("visible"),
        "{printed}"
    );
    assert!(
        printed.contains("TOKEN") && printed.contains("\"size\":24"),
        "{printed}"
    );
    // The one resolve API.
    let v = secrets::resolve(tx.as_mut(), &ctx.secrets, p.id, "keys", "TOKEN")
        .await
        .unwrap();
    assert_eq!(v, VALUE.as_bytes());
    let missing = secrets::resolve(tx.as_mut(), &ctx.secrets, p.id, "keys", "NOPE")
        .await
        .unwrap_err();
    assert_eq!(missing.to_string(), "Secret \"keys\" has no key \"NOPE\"");
    drop(tx);

    // The same values again: unchanged. A new value: configured, a new
    // digest for that key only.
    let again = apply(&ctx, &secret(VALUE)).await.unwrap();
    assert_eq!(again[0].action, Action::Unchanged);
    let changed = apply(&ctx, &secret("sk-live-rotated")).await.unwrap();
    assert_eq!(changed[0].action, Action::Configured);
    let mut tx = ctx.store.begin().await.unwrap();
    let row2 = tx.by_name::<Secret>(p.id, "keys").await.unwrap().unwrap();
    let keys = |s: &pam_store::Secret, k: &str| s.meta.spec["keys"][k]["digest"].clone();
    assert_ne!(keys(&row, "TOKEN"), keys(&row2, "TOKEN"));
    assert_eq!(keys(&row, "PLAIN"), keys(&row2, "PLAIN"));
    // No value in any event.
    let events = tx.events_after(0, 1000).await.unwrap();
    let text = format!("{events:?}");
    assert!(!text.contains(VALUE) && !text.contains("sk-live-rotated"));
}

#[tokio::test]
async fn bad_secrets_and_references_are_refused_with_file_and_line() {
    let ctx = ctx();
    apply(&ctx, BASE).await.unwrap();
    let bad_b64 = "apiVersion: pam.dev/v1\nkind: Secret\nmetadata:\n  name: b\n  project: web\nspec:\n  data:\n    K: 'not*base64!SECRETVALUE'\n";
    let Err(ApplyError::Invalid(errs)) = apply(&ctx, bad_b64).await else {
        panic!("bad base64 applied")
    };
    assert_eq!(
        (errs[0].file.as_str(), errs[0].line),
        ("s.yaml", 8),
        "{errs:?}"
    );
    assert!(!format!("{errs:?}").contains("SECRETVALUE"));

    let big = format!(
        "apiVersion: pam.dev/v1\nkind: Secret\nmetadata:\n  name: big\n  project: web\nspec:\n  stringData:\n    A: {}\n    B: {}\n",
        "a".repeat(600 << 10),
        "b".repeat(600 << 10)
    );
    let Err(ApplyError::Invalid(errs)) = apply(&ctx, &big).await else {
        panic!("a Secret over 1 MiB applied")
    };
    assert!(errs.iter().any(|e| e.message.contains("1 MiB")), "{errs:?}");
    assert!(errs.iter().all(|e| e.line > 0));

    // Another project's Secret, with a good Secret in the same batch:
    // nothing of the batch is written.
    let cross = format!(
        "{}---\napiVersion: pam.dev/v1\nkind: Run\nmetadata:\n  name: x\n  project: web\nspec:\n  task: t\n  provider: claude\n  cwd: /tmp\n  envFrom:\n  - secretRef:\n      name: keys\n      project: other\n",
        secret(VALUE)
    );
    let Err(ApplyError::Invalid(errs)) = apply(&ctx, &cross).await else {
        panic!("a cross-project reference applied")
    };
    assert_eq!(errs[0].path, "spec.envFrom[0].secretRef.project");
    assert_eq!(errs[0].line, 23, "{errs:?}");
    let mut tx = ctx.store.begin().await.unwrap();
    let p = tx.by_name::<Project>((), "web").await.unwrap().unwrap();
    assert!(tx.list::<Secret>(p.id).await.unwrap().is_empty());
}

#[tokio::test]
async fn a_run_waits_for_its_secret_and_gets_its_environment() {
    let ctx = ctx();
    apply(&ctx, BASE).await.unwrap();
    let h = host(&ctx).await;
    apply(&ctx, &run("r", "TOKEN")).await.unwrap();
    reconcile::pass(&ctx).await.unwrap();
    assert!(claims::claim(&ctx, h.id, 10).await.unwrap().is_empty());
    let r = stored_run(&ctx, "r").await;
    let mut tx = ctx.store.begin().await.unwrap();
    let waits = tx.run_secret_waits(None).await.unwrap();
    assert_eq!(waits.len(), 1);
    assert_eq!(
        waits[0].message,
        "Secret \"keys\" does not exist in the run's project"
    );
    drop(tx);

    // The Secret without the key: still waiting, now naming the key.
    apply(&ctx, &secret(VALUE).replace("TOKEN", "OTHER"))
        .await
        .unwrap();
    reconcile::pass(&ctx).await.unwrap();
    let mut tx = ctx.store.begin().await.unwrap();
    assert_eq!(
        tx.run_secret_waits(None).await.unwrap()[0].message,
        "Secret \"keys\" has no key \"TOKEN\""
    );
    drop(tx);
    assert!(claims::claim(&ctx, h.id, 10).await.unwrap().is_empty());

    // With the key: released, claimed, and the environment has the value.
    apply(&ctx, &secret(VALUE)).await.unwrap();
    reconcile::pass(&ctx).await.unwrap();
    let claimed = claims::claim(&ctx, h.id, 10).await.unwrap();
    assert_eq!(claimed.iter().map(|r| r.id).collect::<Vec<_>>(), [r.id]);
    let mut tx = ctx.store.begin().await.unwrap();
    let e = env::environment(tx.as_mut(), &ctx.secrets, &claimed[0])
        .await
        .unwrap();
    assert_eq!(e["API_KEY"], VALUE);
    assert_eq!(e["LITERAL"], "lit");

    // Rotation: a new key, every Secret re-sealed, values unchanged.
    let old = ctx.secrets.current_id();
    let new = ctx.secrets.add_current().unwrap();
    let n = secrets::reseal_batch(tx.as_mut(), &ctx.secrets, 100, ctx.now())
        .await
        .unwrap();
    assert_eq!(n, 1);
    assert!(!tx.secrets_sealed_with(&old).await.unwrap());
    ctx.secrets.retire(&[old]).unwrap();
    assert_eq!(ctx.secrets.ids(), [new]);
    let e = env::environment(tx.as_mut(), &ctx.secrets, &claimed[0])
        .await
        .unwrap();
    assert_eq!(e["API_KEY"], VALUE);
}

#[tokio::test]
async fn waiting_for_a_secret_never_counts_against_the_dispatch_timeout() {
    let clock = Arc::new(ManualClock::new(
        Utc.with_ymd_and_hms(2026, 1, 1, 12, 0, 0).unwrap(),
    ));
    let ctx = Ctx::new(
        Arc::new(MemStore::new()),
        clock.clone(),
        Thresholds::default(),
    );
    apply(&ctx, BASE).await.unwrap();
    apply(&ctx, &run("r", "TOKEN")).await.unwrap();
    // Ten minutes waiting: twice the default dispatch timeout (300 s).
    for _ in 0..10 {
        clock.advance(chrono::Duration::seconds(60));
        reconcile::pass(&ctx).await.unwrap();
    }
    assert_eq!(
        stored_run(&ctx, "r").await.status,
        pam_manifests::state::RunStatus::Pending
    );
    // Released in a pass: the timeout counts from then, so the same pass
    // (and the next few minutes without a host) leave it pending.
    apply(&ctx, &secret(VALUE)).await.unwrap();
    reconcile::pass(&ctx).await.unwrap();
    clock.advance(chrono::Duration::seconds(120));
    reconcile::pass(&ctx).await.unwrap();
    let r = stored_run(&ctx, "r").await;
    assert_eq!(r.status, pam_manifests::state::RunStatus::Pending, "{r:?}");
}
