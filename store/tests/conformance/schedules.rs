//! Schedules: rows per project, the guarded tick, one run per
//! tick, cascades.

use super::*;
use pam_store::Schedule;

fn schedule(p: &Project, name: &str) -> Schedule {
    Schedule {
        id: Uuid::new_v4(),
        project_id: p.id,
        name: name.to_string(),
        meta: Meta {
            spec: json!({"schedule": "* * * * *"}),
            ..Meta::default()
        },
        last_schedule_time: None,
        created_at: t(0),
        updated_at: t(0),
    }
}

pub async fn schedule_ticks_are_taken_once(s: &dyn Store) {
    let (p, task) = seed(s).await;
    let a = schedule(&p, "nightly");
    let mut tx = s.begin().await.unwrap();
    tx.insert(&a).await.unwrap();
    let dup = tx.insert(&schedule(&p, "nightly")).await;
    assert!(matches!(dup, Err(StoreError::AlreadyExists(_))), "{dup:?}");
    tx.insert(&schedule(&p, "hourly")).await.unwrap();
    tx.commit().await.unwrap();

    let mut tx = s.begin().await.unwrap();
    let names = names_of(tx.list::<Schedule>(p.id).await, |x| &x.name);
    assert_eq!(names, ["hourly", "nightly"]);
    let by_id = tx.get::<Schedule>(a.id).await.unwrap().unwrap();
    assert_eq!((by_id.id, by_id.name.as_str()), (a.id, "nightly"));
    assert!(tx.get::<Schedule>(Uuid::new_v4()).await.unwrap().is_none());
    assert_eq!(tx.list_all_schedules().await.unwrap().len(), 2);
    // The guarded tick: from what was read only.
    let taken = tx.take_tick(a.id, None, t(60), t(61)).await.unwrap();
    assert_eq!(taken.last_schedule_time, Some(t(60)));
    assert_eq!(taken.meta.resource_version, 2);
    let again = tx.take_tick(a.id, None, t(60), t(61)).await;
    assert!(matches!(again, Err(StoreError::Conflict(_))), "{again:?}");
    let gone = tx.take_tick(Uuid::new_v4(), None, t(60), t(61)).await;
    assert!(matches!(gone, Err(StoreError::NotFound(_))), "{gone:?}");
    tx.take_tick(a.id, Some(t(60)), t(120), t(121))
        .await
        .unwrap();
    // update_schedule never writes the tick.
    let mut b = tx
        .by_name::<Schedule>(p.id, "nightly")
        .await
        .unwrap()
        .unwrap();
    b.meta.spec = json!({"schedule": "@hourly"});
    b.last_schedule_time = None;
    let b = tx.update(&b, 3).await.unwrap();
    assert_eq!(b.last_schedule_time, Some(t(120)));
    assert!(matches!(
        tx.update(&b, 3).await,
        Err(StoreError::Conflict(_))
    ));
    tx.commit().await.unwrap();

    // One run per tick.
    let r1 = run(&task, "nightly-1", t(60));
    let r2 = run(&task, "nightly-2", t(120));
    insert_runs(s, &[r1.clone(), r2.clone()]).await;
    let mut tx = s.begin().await.unwrap();
    tx.insert_schedule_run(a.id, t(120), r2.id).await.unwrap();
    tx.insert_schedule_run(a.id, t(60), r1.id).await.unwrap();
    let twice = tx.insert_schedule_run(a.id, t(60), r2.id).await;
    assert!(
        matches!(twice, Err(StoreError::AlreadyExists(_))),
        "{twice:?}"
    );
    let listed: Vec<(DateTime<Utc>, Uuid)> = tx
        .schedule_runs(a.id)
        .await
        .unwrap()
        .into_iter()
        .map(|(at, r)| (at, r.id))
        .collect();
    assert_eq!(listed, [(t(60), r1.id), (t(120), r2.id)]);
    // A deleted run leaves the list; a deleted project takes the rest.
    assert!(tx.delete_run(r1.id).await.unwrap());
    assert_eq!(tx.schedule_runs(a.id).await.unwrap().len(), 1);
    assert!(tx.delete::<Project>(p.id).await.unwrap());
    assert!(tx.list_all_schedules().await.unwrap().is_empty());
    assert!(tx.schedule_runs(a.id).await.unwrap().is_empty());
}
