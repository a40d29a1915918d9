//! `pamctl diff`: a unified diff per changed object, of the YAML of
//! `{spec, labels, annotations}` live vs desired.

use pam_manifests::Kind;
use serde_json::{Map, Value};
use similar::TextDiff;

use crate::term::{paint, Style};

/// The YAML compared: the three operator-owned parts, always present so an
/// added label shows as one line rather than a new block.
fn comparable(v: &Value) -> String {
    let mut m = Map::new();
    for key in ["spec", "labels", "annotations"] {
        let part = v
            .get(key)
            .cloned()
            .filter(|p| !p.is_null())
            .unwrap_or_else(|| Value::Object(Map::new()));
        m.insert(key.to_string(), part);
    }
    super::to_yaml(&Value::Object(m))
}

/// One item of `POST /api/v1/diff`'s `items`.
pub struct Item<'a> {
    pub kind: Kind,
    pub project: Option<&'a str>,
    pub name: &'a str,
    pub live: Option<&'a Value>,
    /// None: apply would prune it.
    pub desired: Option<&'a Value>,
}

impl Item<'_> {
    fn label(&self) -> String {
        super::qualified_in(self.project, self.kind, self.name)
    }
}

/// The unified diff of one object, empty when nothing differs.
pub fn unified(item: &Item<'_>, colour: bool) -> String {
    let old = item.live.map(comparable).unwrap_or_default();
    let new = item.desired.map(comparable).unwrap_or_default();
    if old == new {
        return String::new();
    }
    let label = item.label();
    let old_header = if item.live.is_some() {
        format!("{label} (live)")
    } else {
        "/dev/null".to_string()
    };
    let new_header = if item.desired.is_some() {
        format!("{label} (desired)")
    } else {
        "/dev/null".to_string()
    };
    let text = TextDiff::from_lines(&old, &new)
        .unified_diff()
        .context_radius(3)
        .header(&old_header, &new_header)
        .to_string();
    if !colour {
        return text;
    }
    text.lines()
        .map(|l| {
            let styled = if l.starts_with("+++") || l.starts_with("---") {
                paint(true, Style::Bold, l)
            } else if l.starts_with('+') {
                paint(true, Style::Green, l)
            } else if l.starts_with('-') {
                paint(true, Style::Red, l)
            } else if l.starts_with("@@") {
                paint(true, Style::Cyan, l)
            } else {
                l.to_string()
            };
            styled + "\n"
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn update_shows_changed_lines_only_with_context() {
        let live = json!({"spec": {"title": "Build", "status": "todo", "sortOrder": 0}, "labels": {"app": "web"}, "annotations": null});
        let desired = json!({"spec": {"title": "Build it", "status": "todo", "sortOrder": 0}, "labels": {"app": "web", "tier": "1"}});
        let item = Item {
            kind: Kind::Task,
            project: Some("web"),
            name: "build",
            live: Some(&live),
            desired: Some(&desired),
        };
        insta::assert_snapshot!(unified(&item, false), @r"
        --- web/task.pam.dev/build (live)
        +++ web/task.pam.dev/build (desired)
        @@ -1,7 +1,8 @@
         annotations: {}
         labels:
           app: web
        +  tier: '1'
         spec:
           sortOrder: 0
           status: todo
        -  title: Build
        +  title: Build it
        ");
    }

    #[test]
    fn a_prune_diffs_to_dev_null() {
        let live = json!({"spec": {"title": "Old"}, "labels": {}, "annotations": {}});
        let item = Item {
            kind: Kind::Task,
            project: Some("web"),
            name: "old",
            live: Some(&live),
            desired: None,
        };
        insta::assert_snapshot!(unified(&item, false), @r"
        --- web/task.pam.dev/old (live)
        +++ /dev/null
        @@ -1,4 +0,0 @@
        -annotations: {}
        -labels: {}
        -spec:
        -  title: Old
        ");
    }

    #[test]
    fn create_diffs_from_dev_null() {
        let desired = json!({"spec": {"platform": "linux"}, "labels": {}, "annotations": {}});
        let item = Item {
            kind: Kind::Host,
            project: None,
            name: "alpha",
            live: None,
            desired: Some(&desired),
        };
        insta::assert_snapshot!(unified(&item, false), @r"
        --- /dev/null
        +++ host.pam.dev/alpha (desired)
        @@ -0,0 +1,4 @@
        +annotations: {}
        +labels: {}
        +spec:
        +  platform: linux
        ");
    }

    #[test]
    fn unchanged_is_empty_and_colour_wraps_lines() {
        let v = json!({"spec": {"a": 1}});
        let item = Item {
            kind: Kind::Project,
            project: None,
            name: "p",
            live: Some(&v),
            desired: Some(&v),
        };
        assert_eq!(unified(&item, false), "");
        let new = json!({"spec": {"a": 2}});
        let item = Item {
            desired: Some(&new),
            ..item
        };
        let coloured = unified(&item, true);
        assert!(
            coloured.contains("\x1b[1;31m-  a: 1\x1b[0m"),
            "{coloured:?}"
        );
        assert!(coloured.contains("\x1b[32m+  a: 2\x1b[0m"), "{coloured:?}");
    }
}
