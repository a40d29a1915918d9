//! A Source's owned objects as a tree (`argocd app get`'s
//! resource tree): under each project its objects, cluster-scoped ones
//! first — shown by `get source NAME -o wide` and `describe source`.

use serde_json::Value;

use super::table::{cell, Table};

/// The tree of `status.objects` of one Source as the server prints a get
/// of one (`None` for anything else: a listing carries no objects).
pub fn source_objects(obj: &Value) -> Option<String> {
    let objects = obj.pointer("/status/objects").and_then(Value::as_array)?;
    let omitted = obj
        .pointer("/status/objectsOmitted")
        .and_then(Value::as_u64);
    let mut t = Table::new(&["OBJECT", "SYNC", "HEALTH", "MESSAGE"]);
    let row = |t: &mut Table, prefix: &str, o: &Value| {
        t.row(vec![
            format!("{prefix}{}/{}", cell(o, "/kind"), cell(o, "/name")),
            cell(o, "/sync"),
            cell(o, "/health"),
            cell(o, "/message"),
        ]);
    };
    let project_of = |o: &Value| o.get("project").and_then(Value::as_str).map(str::to_string);
    // Cluster-scoped objects (a Project is one) at the root, in the
    // server's order (kind, project, name).
    let mut projects: Vec<String> = Vec::new();
    for o in objects {
        if let Some(p) = project_of(o) {
            if !projects.contains(&p) {
                projects.push(p);
            }
        }
    }
    let roots: Vec<&Value> = objects.iter().filter(|o| project_of(o).is_none()).collect();
    for o in &roots {
        let is_project = |p: &String| cell(o, "/kind") == "Project" && &cell(o, "/name") == p;
        if cell(o, "/kind") == "Project" && projects.iter().any(is_project) {
            continue; // printed with its objects below
        }
        row(&mut t, "", o);
    }
    for p in &projects {
        match roots
            .iter()
            .find(|o| cell(o, "/kind") == "Project" && cell(o, "/name") == *p)
        {
            Some(o) => row(&mut t, "", o),
            // The project itself is not the Source's: its name as the root.
            None => t.row(vec![
                format!("Project/{p}"),
                String::new(),
                String::new(),
                "(not owned)".into(),
            ]),
        }
        let under: Vec<&Value> = objects
            .iter()
            .filter(|o| project_of(o).as_deref() == Some(p.as_str()))
            .collect();
        for (i, o) in under.iter().enumerate() {
            let branch = if i + 1 == under.len() {
                "└─ "
            } else {
                "├─ "
            };
            row(&mut t, branch, o);
        }
    }
    let mut out = t.render();
    if let Some(n) = omitted {
        out.push_str(&format!("… and {n} more\n"));
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn projects_root_their_objects_and_departed_ones_show_their_state() {
        let s = json!({"status": {"objects": [
            {"kind": "Project", "name": "shop", "sync": "Synced", "health": "Healthy"},
            {"kind": "Run", "project": "shop", "name": "build-1", "sync": "Synced",
             "health": "Progressing", "message": "running"},
            {"kind": "Run", "project": "web", "name": "old", "sync": "Pruned",
             "health": "Missing", "message": "left the tree; pruned"},
            {"kind": "Task", "project": "shop", "name": "build", "sync": "Held",
             "health": "Healthy", "message": "left the tree; kept: pruning would also delete Run shop/x"},
        ], "objectsOmitted": 3}});
        insta::assert_snapshot!(super::source_objects(&s).unwrap(), @r"
        OBJECT           SYNC     HEALTH        MESSAGE
        Project/shop     Synced   Healthy       <none>
        ├─ Run/build-1   Synced   Progressing   running
        └─ Task/build    Held     Healthy       left the tree; kept: pruning would also delete Run shop/x
        Project/web                             (not owned)
        └─ Run/old       Pruned   Missing       left the tree; pruned
        … and 3 more
        ");
        assert_eq!(super::source_objects(&json!({"status": {}})), None);
    }
}
