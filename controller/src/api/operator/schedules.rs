//! `/api/v1/projects/P/schedules`: list, get (with next/last
//! tick, active runs, last result), delete, and `POST …/NAME/trigger` —
//! one run now (`pamctl schedule trigger NAME`).

use async_trait::async_trait;
use axum::extract::State;
use axum::http::StatusCode;
use pam_store::prelude::*;
use pam_store::Schedule;
use serde_json::{json, Value};

use crate::api::access::auth::Operator;
use crate::api::extract::{Json, Path};
use crate::api::operator::served::{one_in, scoped, At, Served};
use crate::api::{operator::objects, ApiError, AppState};
use crate::rules::schedules::{self, Tick};

type ApiResult<T> = Result<T, ApiError>;

#[async_trait]
impl Served for Schedule {
    /// With next/last tick, active runs and the last result.
    async fn print(tx: &mut dyn Tx, at: At<'_>, items: &[Self]) -> ApiResult<Vec<Value>> {
        let p = at.project;
        let now = at.now;
        let slug = &scoped(p)?.slug;
        let mut out = Vec::with_capacity(items.len());
        for s in items {
            let runs = tx.schedule_runs(s.id).await?;
            out.push(objects::schedule(s, slug, &runs, now));
        }
        Ok(out)
    }
}

#[tracing::instrument(skip_all, fields(project = %slug, schedule = %name))]
pub async fn trigger_schedule(
    State(st): State<AppState>,
    _op: Operator,
    Path((slug, name)): Path<(String, String)>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let mut tx = st.ctx.store.begin().await?;
    let (p, s) = one_in::<Schedule>(tx.as_mut(), &slug, &name).await?;
    match schedules::trigger(tx.as_mut(), &s, &p.slug, st.ctx.now()).await? {
        Tick::Created(run) => {
            st.ctx.commit(tx).await?;
            st.ctx.wakeups.claimable.notify_waiters();
            Ok((StatusCode::CREATED, Json(json!({ "run": run }))))
        }
        Tick::Skipped(why) => Err(ApiError::new(StatusCode::CONFLICT, "conflict", why)),
        Tick::Missed => Err(ApiError::new(
            StatusCode::CONFLICT,
            "conflict",
            "the trigger was not taken",
        )),
    }
}
