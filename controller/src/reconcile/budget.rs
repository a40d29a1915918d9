//! Project budgets: each pass compares what every project's
//! runs used with the project's `spec.budget` and sets or clears its
//! condition `BudgetExceeded` ([`projects::set_budget_state`]), which
//! claims honour. Two reads whatever the number of projects: the projects,
//! then one usage roll-up over those with a budget or the condition.

use pam_store::Project;
use std::collections::HashMap;

use crate::ctx::Ctx;
use crate::rules::projects;
use crate::rules::runs::usage;

/// What the sweep changed: projects now over budget, projects whose runs
/// may be dispatched again.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Swept {
    pub exceeded: usize,
    pub restored: usize,
}

pub async fn sweep(ctx: &Ctx) -> anyhow::Result<Swept> {
    let now = ctx.now();
    let mut tx = ctx.store.begin().await?;
    let watched: Vec<_> = tx
        .list::<Project>(())
        .await?
        .into_iter()
        .filter(|p| {
            usage::budget_of(&p.meta).is_some() || pam_store::projects::over_budget(&p.meta)
        })
        .collect();
    if watched.is_empty() {
        return Ok(Swept::default());
    }
    let ids: Vec<_> = watched.iter().map(|p| p.id).collect();
    let used: HashMap<_, _> = tx.usage_by_project(&ids).await?.into_iter().collect();
    let mut swept = Swept::default();
    for p in watched {
        let why = usage::budget_exceeded(
            usage::budget_of(&p.meta).as_ref(),
            &used.get(&p.id).copied().unwrap_or_default(),
        );
        let over = why.is_some();
        if projects::set_budget_state(tx.as_mut(), p, why.as_deref(), now).await? {
            if over {
                swept.exceeded += 1;
            } else {
                swept.restored += 1;
            }
        }
    }
    if swept != Swept::default() {
        ctx.commit(tx).await?;
    }
    Ok(swept)
}
