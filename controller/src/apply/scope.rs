//! Which projects a batch touches, checked against the caller's token
//! with the one decision ([`access::authorize`]): every
//! document before anything is read, and every result (prune's included)
//! before the batch commits. A batch with one object the token may not
//! touch is refused whole, with a 403 that names no project: a project the
//! token cannot see must not be told to exist.

use pam_manifests::kinds::{Kind, Manifest};
use pam_manifests::load::Document;

use super::{ApplyError, ApplyResult};
use crate::rules::access::{self, Decision, Grant, Verb};

/// The resource and project of an object: a Project object belongs to
/// the project it is; a cluster-scoped kind's to none.
fn target(kind: Kind, project: Option<&str>, name: &str) -> (&'static str, Option<String>) {
    let info = kind.info();
    let project = match kind {
        Kind::Project => Some(name.to_string()),
        _ => project.map(str::to_string),
    };
    (info.plural, project)
}

fn check(
    grant: &Grant,
    verb: Verb,
    resource: &'static str,
    project: Option<&str>,
) -> Result<(), ApplyError> {
    match access::authorize(grant, verb, resource, project) {
        Decision::Allow => Ok(()),
        // Said alike: the message must not tell a hidden project from a
        // verb the role lacks.
        Decision::Forbidden | Decision::Hidden => Err(ApplyError::Forbidden(format!(
            "this token may not {} every object of this batch",
            verb.as_str()
        ))),
    }
}

/// Every document of the batch may be `verb`ed by `grant` (None: no
/// token, the sync loop's own batches).
pub fn documents(grant: Option<&Grant>, verb: Verb, docs: &[Document]) -> Result<(), ApplyError> {
    let Some(grant) = grant else { return Ok(()) };
    for d in docs {
        let m: &Manifest = &d.manifest;
        let (resource, project) =
            target(m.kind(), m.project().map(|p| p.as_str()), m.name().as_str());
        check(grant, verb, resource, project.as_deref())?;
    }
    Ok(())
}

/// Every result of a written batch (what prune found included) may be
/// written by `grant`.
pub fn results(grant: Option<&Grant>, results: &[ApplyResult]) -> Result<(), ApplyError> {
    let Some(grant) = grant else { return Ok(()) };
    for r in results {
        let Some(kind) = Kind::parse(r.kind) else {
            continue;
        };
        let verb = match r.action {
            super::Action::Pruned | super::Action::Kept => Verb::Delete,
            _ => Verb::Update,
        };
        let (resource, project) = target(kind, r.project.as_deref(), &r.name);
        check(grant, verb, resource, project.as_deref())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apply::Action;
    use crate::rules::access::Role;

    fn result(
        kind: &'static str,
        project: Option<&str>,
        name: &str,
        action: Action,
    ) -> ApplyResult {
        ApplyResult {
            kind,
            project: project.map(str::to_string),
            name: name.into(),
            action,
            generation: None,
            message: None,
        }
    }

    #[test]
    fn a_result_outside_the_grant_refuses_the_batch_naming_nothing() {
        let op = Grant {
            role: Role::Operator,
            projects: vec!["web".into()],
            read_only: Vec::new(),
        };
        let web = result("Run", Some("web"), "r1", Action::Pruned);
        assert!(results(Some(&op), std::slice::from_ref(&web)).is_ok());
        let own_project = result("Project", None, "web", Action::Configured);
        assert!(results(Some(&op), &[own_project]).is_ok());
        for other in [
            result("Run", Some("api"), "r2", Action::Pruned),
            result("Project", None, "api", Action::Created),
            result("Webhook", None, "hook", Action::Configured),
        ] {
            let Err(ApplyError::Forbidden(m)) = results(Some(&op), &[web.clone(), other]) else {
                panic!("not refused");
            };
            assert!(!m.contains("api") && !m.contains("hook"), "{m}");
        }
        // pamd's own batches (a Source's sync) are not checked.
        assert!(results(None, &[result("Run", Some("api"), "r2", Action::Pruned)]).is_ok());
    }
}
