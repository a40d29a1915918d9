//! The ways kubectl names objects on the command line, shared by `get`,
//! `describe`, `delete`, `edit`, `label` and `annotate`: `KIND`,
//! `KIND NAME…`, `KIND,KIND…` and `KIND/NAME…`.

use pam_manifests::Kind;

use crate::error::{CliError, Result};
use crate::parse_kind;

/// One kind and the names asked for (none: every object of the kind).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Request {
    pub kind: Kind,
    pub names: Vec<String>,
}

/// Parses kubectl's forms. `KIND/NAME` arguments may mix kinds but not
/// stand next to a bare `KIND`; names after `KIND,KIND` apply to each
/// kind. Kinds keep the order they were first named in.
pub(crate) fn parse(args: &[String]) -> Result<Vec<Request>> {
    let Some(first) = args.first() else {
        return Err(CliError::usage(
            "which objects? pass KIND, KIND NAME… or KIND/NAME…",
        ));
    };
    let mut out: Vec<Request> = Vec::new();
    let mut add = |kind: Kind, name: Option<&str>| {
        let at = match out.iter().position(|r| r.kind == kind) {
            Some(i) => i,
            None => {
                out.push(Request {
                    kind,
                    names: Vec::new(),
                });
                out.len() - 1
            }
        };
        if let Some(n) = name {
            if !out[at].names.iter().any(|x| x == n) {
                out[at].names.push(n.to_string());
            }
        }
    };
    if first.contains('/') {
        for a in args {
            let (k, n) = a.split_once('/').ok_or_else(|| {
                CliError::usage(format!(
                    "{a:?}: after a KIND/NAME argument every argument must be KIND/NAME"
                ))
            })?;
            if n.is_empty() {
                return Err(CliError::usage(format!("{a:?}: no name after the /")));
            }
            add(parse_kind(k)?, Some(n));
        }
        return Ok(out);
    }
    let kinds = first
        .split(',')
        .map(|k| parse_kind(k.trim()))
        .collect::<Result<Vec<_>>>()?;
    for name in &args[1..] {
        if name.contains('/') {
            return Err(CliError::usage(format!(
                "{name:?}: there is no need to give a KIND as a separate argument when passing KIND/NAME"
            ))
            .hint(format!("drop {first:?}, or give the bare name")));
        }
    }
    for kind in kinds {
        add(kind, None);
        for n in &args[1..] {
            add(kind, Some(n));
        }
    }
    Ok(out)
}

/// [`parse`] for verbs that take exactly one kind (`KIND NAME…` or
/// `KIND/NAME…` of one kind).
pub(crate) fn parse_one_kind(args: &[String], verb: &str) -> Result<Request> {
    let mut requests = parse(args)?;
    if requests.len() != 1 {
        return Err(CliError::usage(format!(
            "{verb}: give objects of one kind at a time"
        )));
    }
    Ok(requests.remove(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(args: &[&str]) -> Result<Vec<Request>> {
        parse(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    fn req(kind: Kind, names: &[&str]) -> Request {
        Request {
            kind,
            names: names.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn kubectl_forms() {
        assert_eq!(p(&["tasks"]).unwrap(), [req(Kind::Task, &[])]);
        assert_eq!(
            p(&["task", "a", "b"]).unwrap(),
            [req(Kind::Task, &["a", "b"])]
        );
        assert_eq!(
            p(&["runs,tasks"]).unwrap(),
            [req(Kind::Run, &[]), req(Kind::Task, &[])]
        );
        assert_eq!(
            p(&["run/a", "task/t", "rn/b", "run/a"]).unwrap(),
            [req(Kind::Run, &["a", "b"]), req(Kind::Task, &["t"])]
        );
        assert_eq!(
            p(&["run,task", "x"]).unwrap(),
            [req(Kind::Run, &["x"]), req(Kind::Task, &["x"])]
        );
    }

    #[test]
    fn mixed_and_bad_forms() {
        let e = p(&["run", "run/a"]).unwrap_err();
        assert!(
            e.message.contains("no need to give a KIND"),
            "{}",
            e.message
        );
        let e = p(&["run/a", "b"]).unwrap_err();
        assert!(
            e.message.contains("every argument must be KIND/NAME"),
            "{}",
            e.message
        );
        assert!(p(&["pods/a"]).unwrap_err().message.contains("unknown kind"));
        assert!(p(&["run/"]).is_err());
        assert!(p(&[]).is_err());
        let one = |a: &[&str]| {
            parse_one_kind(&a.iter().map(|s| s.to_string()).collect::<Vec<_>>(), "edit")
        };
        assert_eq!(one(&["task/a"]).unwrap(), req(Kind::Task, &["a"]));
        assert!(one(&["task/a", "run/b"]).is_err());
    }
}
