//! A Source's substitution variables, read when it syncs: the
//! `vars.pam.dev/NAME` annotations of its `spec.substitute.fromProjects`,
//! then the keys of its `fromSecrets` over them (opened with pamd's
//! keyring, a later Secret over an earlier one), then its `vars` over
//! them all.
//! Substituting is `pam_manifests::load::substitute`'s.

use pam_manifests::kinds::{SourceSpec, VARS_ANNOTATION_PREFIX};
use pam_manifests::load::substitute::{valid_name, Vars};
use pam_store::{Project, Secret};

use crate::ctx::Ctx;
use crate::rules::secrets::open_values;

/// `Ok(None)`: the Source substitutes nothing. `Ok(Some(Err(why)))`: a
/// Secret it names is missing or cannot be opened — the sync fails with
/// `why`, which never holds a value.
pub async fn vars_of(ctx: &Ctx, spec: &SourceSpec) -> anyhow::Result<Option<Result<Vars, String>>> {
    let Some(sub) = &spec.substitute else {
        return Ok(None);
    };
    let mut vars = Vars::new();
    if !sub.from_secrets.is_empty() || !sub.from_projects.is_empty() {
        // A read: dropped, never committed.
        let mut tx = ctx.store.begin().await?;
        for name in &sub.from_projects {
            let Some(p) = tx.by_name::<Project>((), name.as_str()).await? else {
                return Ok(Some(Err(format!(
                    "spec.substitute.fromProjects: no project {:?}",
                    name.as_str()
                ))));
            };
            for (k, v) in &p.meta.annotations {
                let var = k.strip_prefix(VARS_ANNOTATION_PREFIX);
                if let Some(var) = var.filter(|n| valid_name(n)) {
                    vars.insert(var.to_string(), v.clone());
                }
            }
        }
        for r in &sub.from_secrets {
            let project = tx.by_name::<Project>((), r.project.as_str()).await?;
            let secret = match project {
                Some(p) => tx.by_name::<Secret>(p.id, r.name.as_str()).await?,
                None => None,
            };
            let Some(secret) = secret else {
                return Ok(Some(Err(format!(
                    "spec.substitute.fromSecrets: no Secret {:?} in project {:?}",
                    r.name.as_str(),
                    r.project.as_str()
                ))));
            };
            match open_values(&ctx.secrets, &secret) {
                Ok(values) => {
                    for (k, v) in values {
                        if valid_name(&k) {
                            vars.insert(k, String::from_utf8_lossy(&v).into_owned());
                        }
                    }
                }
                Err(e) => {
                    return Ok(Some(Err(format!(
                        "spec.substitute.fromSecrets: Secret {:?}: {e}",
                        r.name.as_str()
                    ))))
                }
            }
        }
    }
    vars.extend(sub.vars.iter().map(|(k, v)| (k.clone(), v.clone())));
    Ok(Some(Ok(vars)))
}
