//! Runs made from a spec rather than applied: a Schedule's tick (its
//! `runTemplate`) and a re-run of a finished run (like
//! `kubectl create job --from`). Both go through [`super::create`].

use chrono::{DateTime, Utc};
use pam_manifests::kinds::{self, Manifest};
use pam_manifests::names::{Annotations, LabelKey, Labels, Name};
use pam_manifests::state::RunStatus;
use pam_store::prelude::*;
use pam_store::{Run, StoreError, StoreResult, WorkItem};
use uuid::Uuid;

use super::RunDesired;
use crate::rules::meta::Desired;

/// The annotation a re-run carries: the name of the run it repeats.
pub const RERUN_OF: &str = "pam.dev/rerun-of";

/// Re-runs stop looking for a free name `<run>-r<N>` after this many.
const MAX_RERUNS: u32 = 1000;

/// A run to create from a spec.
pub struct Template {
    pub name: String,
    pub labels: Labels,
    pub annotations: Annotations,
    pub spec: kinds::RunSpec,
}

/// Creates the run `t` declares in the project `project_id` for `task`
/// (as [`super::create`], journaling `run.created`).
pub async fn create(
    tx: &mut dyn Tx,
    project_id: Uuid,
    project_slug: &str,
    task: &WorkItem,
    t: Template,
    now: DateTime<Utc>,
) -> StoreResult<Run> {
    let bad = |what: &str| StoreError::Invalid(format!("run {}: {what}", t.name));
    let run = kinds::Run::new(
        kinds::ProjectObjectMeta {
            name: Name::parse(&t.name).map_err(|e| bad(&format!("name: {e}")))?,
            project: Name::parse(project_slug).map_err(|_| bad("project name"))?,
            labels: t.labels,
            annotations: t.annotations,
            uid: None,
            generation: None,
            resource_version: None,
            creation_timestamp: None,
            managed_fields: None,
        },
        t.spec,
    );
    let m = Manifest::Run(Box::new(run));
    let Manifest::Run(r) = &m else { unreachable!() };
    let desired = RunDesired::of(r, Desired::of(&m));
    super::create(tx, project_id, project_slug, task, desired, now).await
}

/// Whether a run is over for good: exited, stopped, or failed with no
/// restart to come. A re-run repeats only such a run.
pub fn finished(r: &Run) -> bool {
    r.status.is_terminal() || (r.status == RunStatus::Failed && r.requeue_at.is_none())
}

/// `pamctl rerun RUN`: a new run of the same task with the same spec
/// (not stopped), named `<run>-r<N>` (the first free N), its labels but
/// the Schedule's (it is nobody's tick), and the annotation
/// [`RERUN_OF`]. A run not finished is a Conflict.
pub async fn rerun(
    tx: &mut dyn Tx,
    project_slug: &str,
    run: &Run,
    now: DateTime<Utc>,
) -> StoreResult<Run> {
    if !finished(run) {
        return Err(StoreError::Conflict(format!(
            "run {} is {}: only a finished run can be re-run",
            run.name,
            run.status.as_str()
        )));
    }
    let invalid = |what: String| StoreError::Invalid(format!("run {}: {what}", run.name));
    let mut spec: kinds::RunSpec = serde_json::from_value(run.meta.spec.clone())
        .map_err(|e| invalid(format!("stored spec: {e}")))?;
    spec.stopped = false;
    let task = tx
        .get_work_item(run.task_id)
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("task of run {}", run.name)))?;
    let mut name = None;
    for n in 1..=MAX_RERUNS {
        let candidate = format!("{}-r{n}", run.name);
        if tx
            .get_run_by_name(run.project_id, &candidate)
            .await?
            .is_none()
        {
            name = Some(candidate);
            break;
        }
    }
    let name = name.ok_or_else(|| {
        StoreError::Conflict(format!("run {} has {MAX_RERUNS} re-runs", run.name))
    })?;
    let key = |k: &str| LabelKey::parse(k).map_err(|e| invalid(format!("label {k}: {e}")));
    let mut labels = Labels::new();
    for (k, v) in &run.meta.labels {
        if k != pam_manifests::kinds::SCHEDULE_LABEL {
            let v = pam_manifests::names::LabelValue::parse(v)
                .map_err(|e| invalid(format!("label {k}: {e}")))?;
            labels.insert(key(k)?, v);
        }
    }
    let mut annotations = Annotations::new();
    for (k, v) in &run.meta.annotations {
        annotations.insert(key(k)?, v.clone());
    }
    annotations.insert(key(RERUN_OF)?, run.name.clone());
    let t = Template {
        name,
        labels,
        annotations,
        spec,
    };
    create(tx, run.project_id, project_slug, &task, t, now).await
}
