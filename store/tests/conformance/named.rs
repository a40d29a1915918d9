//! Conformance: reads by name — what an apply batch names, and nothing
//! more of its project (apply's cost follows the batch).

use super::*;

fn names(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// Sorted like `list_work_items`: path (byte order), sort_order, id.
fn by_path(mut v: Vec<&WorkItem>) -> Vec<Uuid> {
    v.sort_by(|x, y| (&x.path, x.sort_order, x.id).cmp(&(&y.path, y.sort_order, y.id)));
    ids(&v, |w| w.id)
}

/// p: a{b{c{d}}, e}, f; q: a{b}.
async fn chains(s: &dyn Store) -> (Project, Project, Vec<WorkItem>, Vec<WorkItem>) {
    let mut tx = s.begin().await.unwrap();
    let (p, q) = projects_p_q(tx.as_mut()).await;
    let a = tx.insert_work_item(&item(&p, None, "a")).await.unwrap();
    let b = tx.insert_work_item(&item(&p, Some(&a), "b")).await.unwrap();
    let c = tx.insert_work_item(&item(&p, Some(&b), "c")).await.unwrap();
    let d = tx.insert_work_item(&item(&p, Some(&c), "d")).await.unwrap();
    let e = tx.insert_work_item(&item(&p, Some(&a), "e")).await.unwrap();
    let f = tx.insert_work_item(&item(&p, None, "f")).await.unwrap();
    let qa = tx.insert_work_item(&item(&q, None, "a")).await.unwrap();
    let qb = tx
        .insert_work_item(&item(&q, Some(&qa), "b"))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    (p, q, vec![a, b, c, d, e, f], vec![qa, qb])
}

/// The named items and every ancestor, each once, whole rows, in path
/// order; never another project's items of the same names; unknown names
/// left out; by live parent links after a reparent.
pub async fn work_items_with_ancestors_reads_chains(s: &dyn Store) {
    let (p, q, items, q_items) = chains(s).await;
    let [a, b, c, d, e, f] = &items[..] else {
        unreachable!()
    };
    let [qa, qb] = &q_items[..] else {
        unreachable!()
    };
    let mut tx = s.begin().await.unwrap();
    for (named, want) in [
        (vec!["d"], vec![a, b, c, d]),
        (vec!["d", "e"], vec![a, b, c, d, e]),
        (vec!["c", "d", "b"], vec![a, b, c, d]),
        (vec!["e", "f", "nope"], vec![a, e, f]),
        (vec!["a"], vec![a]),
        (vec!["nope"], vec![]),
        (vec![], vec![]),
    ] {
        let got = tx
            .work_items_with_ancestors(p.id, &names(&named))
            .await
            .unwrap();
        assert_eq!(ids(&got, |w| w.id), by_path(want.clone()), "{named:?}");
        // Whole rows, as stored.
        let stored: Vec<WorkItem> = want.iter().map(|w| (*w).clone()).collect();
        for w in &got {
            assert!(stored.contains(w), "{} differs from the stored row", w.name);
        }
    }
    let got = tx
        .work_items_with_ancestors(q.id, &names(&["b", "d"]))
        .await
        .unwrap();
    assert_eq!(ids(&got, |w| w.id), by_path(vec![qa, qb]), "project q");

    // Live links: after d moves under f, d's chain is f, d.
    tx.reparent_work_item(d.id, Some(f.id), t(5)).await.unwrap();
    let got = tx
        .work_items_with_ancestors(p.id, &names(&["d"]))
        .await
        .unwrap();
    let names_got: Vec<&str> = got.iter().map(|w| w.name.as_str()).collect();
    assert_eq!(names_got, ["f", "d"]);
}

/// Items of these names in every project, by name then project id.
pub async fn work_items_named_across_projects(s: &dyn Store) {
    let (p, _, items, q_items) = chains(s).await;
    let mut tx = s.begin().await.unwrap();
    let got = tx
        .work_items_named(&names(&["b", "a", "nope"]))
        .await
        .unwrap();
    let mut want: Vec<&WorkItem> = items
        .iter()
        .chain(&q_items)
        .filter(|w| w.name == "a" || w.name == "b")
        .collect();
    want.sort_by_key(|w| (w.name.clone(), w.project_id));
    assert_eq!(got, want.into_iter().cloned().collect::<Vec<_>>());
    let got = tx.work_items_named(&names(&["f"])).await.unwrap();
    assert_eq!(got.iter().map(|w| w.project_id).collect::<Vec<_>>(), [p.id]);
    assert!(tx.work_items_named(&[]).await.unwrap().is_empty());
}

/// The runs of one project with these names, by created_at then id.
pub async fn runs_named_in_project(s: &dyn Store) {
    let (p, task) = seed(s).await;
    let (q, qt) = other_project(s, "q").await;
    let (r1, r2, r3) = (
        run(&task, "r1", t(3)),
        run(&task, "r2", t(1)),
        run(&task, "r3", t(2)),
    );
    let other = run(&qt, "r1", t(0));
    insert_runs(s, &[r1.clone(), r2.clone(), r3.clone(), other.clone()]).await;
    let mut tx = s.begin().await.unwrap();
    let got = tx
        .runs_named(p.id, &names(&["r1", "r2", "nope"]))
        .await
        .unwrap();
    assert_eq!(got, vec![r2.clone(), r1.clone()], "by created_at");
    let got = tx.runs_named(q.id, &names(&["r1", "r2"])).await.unwrap();
    assert_eq!(got, vec![other]);
    assert!(tx.runs_named(p.id, &[]).await.unwrap().is_empty());
}
