//! `label` and `annotate`, client side: read the object, change its
//! metadata, apply it back as an object carrying the resourceVersion that
//! was read — so a change made in between is a 409 conflict, never lost.
//! Like kubectl, an existing key keeps its value unless `--overwrite`.

use std::collections::BTreeMap;

use pam_manifests::{LabelKey, LabelValue};
use serde_json::{json, Map, Value};

use super::get::fail_after;
use super::targets;
use crate::cli::MetaArgs;
use crate::error::{CliError, Exit, Result};
use crate::{object_path, render, roundtrip, term, Ctx};

/// Which metadata map a verb changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Which {
    Labels,
    Annotations,
}

impl Which {
    fn field(self) -> &'static str {
        match self {
            Which::Labels => "labels",
            Which::Annotations => "annotations",
        }
    }
    fn noun(self) -> &'static str {
        match self {
            Which::Labels => "label",
            Which::Annotations => "annotation",
        }
    }
    /// The verb, as the field manager it writes as (`label:TOKEN`).
    fn noun_verb(self) -> &'static str {
        match self {
            Which::Labels => "label",
            Which::Annotations => "annotate",
        }
    }
    fn done(self) -> &'static str {
        match self {
            Which::Labels => "labeled",
            Which::Annotations => "annotated",
        }
    }
}

/// One requested change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Change {
    Set(String, String),
    Remove(String),
}

/// Whether an argument is a change (`k=v`, `k-`) rather than a name: a
/// DNS label never holds `=` nor ends with `-`.
fn is_change(a: &str) -> bool {
    a.contains('=') || a.ends_with('-')
}

/// Splits the arguments into the objects and the changes, checking keys
/// (and label values) locally.
pub(crate) fn parse_args(which: Which, args: &[String]) -> Result<(Vec<String>, Vec<Change>)> {
    let split = args.iter().position(|a| is_change(a)).unwrap_or(args.len());
    let (objects, changes) = args.split_at(split);
    if changes.is_empty() {
        return Err(CliError::usage(format!(
            "no {} changes given: pass KEY=VALUE to set, KEY- to remove",
            which.noun()
        )));
    }
    let mut out = Vec::new();
    for c in changes {
        let change = match c.split_once('=') {
            Some((k, v)) => Change::Set(k.to_string(), v.to_string()),
            None => match c.strip_suffix('-') {
                Some(k) => Change::Remove(k.to_string()),
                None => {
                    return Err(CliError::usage(format!(
                        "{c:?}: after the objects every argument must be KEY=VALUE or KEY-"
                    )))
                }
            },
        };
        let (Change::Set(key, _) | Change::Remove(key)) = &change;
        LabelKey::parse(key)
            .map_err(|e| CliError::usage(format!("{} key {key:?}: {e}", which.noun())))?;
        if let (Which::Labels, Change::Set(_, v)) = (which, &change) {
            LabelValue::parse(v).map_err(|e| CliError::usage(format!("label value {v:?}: {e}")))?;
        }
        if out.iter().any(|o: &Change| {
            let (Change::Set(k, _) | Change::Remove(k)) = o;
            k == key
        }) {
            return Err(CliError::usage(format!("{key:?} is changed twice")));
        }
        out.push(change);
    }
    Ok((objects.to_vec(), out))
}

/// Applies the changes to a metadata map: `Ok(None)` when nothing
/// changes; an error for an existing key without `overwrite`.
pub(crate) fn change_map(
    which: Which,
    current: &BTreeMap<String, String>,
    changes: &[Change],
    overwrite: bool,
) -> Result<Option<BTreeMap<String, String>>> {
    let mut next = current.clone();
    for c in changes {
        match c {
            Change::Set(k, v) => match current.get(k) {
                Some(old) if old == v => {}
                Some(old) if !overwrite => {
                    return Err(CliError::usage(format!(
                        "{k:?} already has a value ({old}), and --overwrite is false"
                    ))
                    .hint("pass --overwrite to replace it"))
                }
                _ => {
                    next.insert(k.clone(), v.clone());
                }
            },
            Change::Remove(k) => {
                if next.remove(k).is_none() {
                    term::note(&format!("{} {k:?} not found.", which.noun()));
                }
            }
        }
    }
    Ok((next != *current).then_some(next))
}

fn current_map(obj: &Value, which: Which) -> BTreeMap<String, String> {
    obj.pointer(&format!("/metadata/{}", which.field()))
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
        .collect()
}

/// The apply a verb writes through: the server records the fields it
/// changes as `VERB:TOKEN`'s (managed fields);
/// `force_conflicts` takes fields another manager owns.
pub(crate) fn apply_path(verb: &str, force_conflicts: bool) -> String {
    let force = if force_conflicts {
        "&forceConflicts=true"
    } else {
        ""
    };
    format!("/api/v1/apply?fieldManager={verb}{force}")
}

/// Whether a refusal is a field-ownership conflict (not a stale read).
pub(crate) fn field_conflict(e: &CliError) -> bool {
    e.status == Some(409) && e.hints.iter().any(|h| h.contains("--force-conflicts"))
}

/// `label|annotate KIND NAME… KEY=VALUE KEY-`.
pub(crate) fn label(ctx: &mut Ctx, which: Which, a: &MetaArgs) -> Result<Exit> {
    let (objects, changes) = parse_args(which, &a.args)?;
    let request = targets::parse_one_kind(&objects, which.noun())?;
    if request.names.is_empty() {
        return Err(CliError::usage(format!(
            "{}: which objects? pass KIND NAME… or KIND/NAME…",
            which.noun()
        )));
    }
    let kind = request.kind;
    let project = ctx.project_for(kind)?;
    let client = ctx.client()?;
    let mut errors = Vec::new();
    for name in &request.names {
        let result = (|| -> Result<String> {
            let obj = client.get(&object_path(kind, project.as_deref(), name))?;
            let who = render::qualified(kind, name);
            let Some(next) = change_map(which, &current_map(&obj, which), &changes, a.overwrite)?
            else {
                return Ok(format!("{who} not {}", which.done()));
            };
            let mut manifest = render::object(&obj);
            roundtrip::strip(&mut manifest);
            let map: Map<String, Value> = next.into_iter().map(|(k, v)| (k, json!(v))).collect();
            manifest["metadata"][which.field()] = Value::Object(map);
            client.post(
                &apply_path(which.noun_verb(), a.force_conflicts),
                &json!({ "objects": [manifest], "dryRun": false, "prune": false }),
            )?;
            Ok(format!("{who} {}", which.done()))
        })();
        match result {
            Ok(line) => term::outln(&line),
            Err(e) => errors.push(e),
        }
    }
    fail_after(errors)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn objects_then_changes() {
        let (objs, ch) =
            parse_args(Which::Labels, &args(&["task", "build", "tier=be", "old-"])).unwrap();
        assert_eq!(objs, ["task", "build"]);
        assert_eq!(
            ch,
            [
                Change::Set("tier".into(), "be".into()),
                Change::Remove("old".into())
            ]
        );
        let (objs, _) = parse_args(
            Which::Annotations,
            &args(&["task/a", "task/b", "note=free text!"]),
        )
        .unwrap();
        assert_eq!(objs, ["task/a", "task/b"]);
        for bad in [
            &["task", "a"][..],
            &["task", "a", "Bad Key=x"],
            &["task", "a", "k=not ok!"],
            &["task", "a", "k=1", "k-"],
        ] {
            assert_eq!(
                parse_args(Which::Labels, &args(bad)).unwrap_err().exit,
                Exit::Usage,
                "{bad:?}"
            );
        }
    }

    #[test]
    fn overwrite_rules() {
        let cur: BTreeMap<String, String> = [("tier".to_string(), "fe".to_string())].into();
        let set = |k: &str, v: &str| Change::Set(k.into(), v.into());
        let e = change_map(Which::Labels, &cur, &[set("tier", "be")], false).unwrap_err();
        assert_eq!(
            e.message,
            "\"tier\" already has a value (fe), and --overwrite is false"
        );
        let next = change_map(Which::Labels, &cur, &[set("tier", "be")], true)
            .unwrap()
            .unwrap();
        assert_eq!(next["tier"], "be");
        assert_eq!(
            change_map(Which::Labels, &cur, &[set("tier", "fe")], false).unwrap(),
            None
        );
        assert_eq!(
            change_map(Which::Labels, &cur, &[Change::Remove("nope".into())], false).unwrap(),
            None
        );
        let next = change_map(
            Which::Labels,
            &cur,
            &[Change::Remove("tier".into()), set("app", "web")],
            false,
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            next.into_iter().collect::<Vec<_>>(),
            [("app".to_string(), "web".to_string())]
        );
    }
}
