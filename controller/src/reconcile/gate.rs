//! The dependency gate's loop: each pass marks pending runs
//! whose task dependencies are all done as dispatchable (and wakes the
//! claimers), blocks again those whose dependency was reopened, and fails
//! the runs waiting for a cancelled task. The rule is
//! [`crate::rules::runs::gate`]; this loop only decides *when*.

use crate::ctx::Ctx;
use crate::rules::runs::gate::{self, GatePass};

pub async fn sweep(ctx: &Ctx) -> anyhow::Result<GatePass> {
    let now = ctx.now();
    let mut tx = ctx.store.begin().await?;
    let done = gate::pass(tx.as_mut(), now).await?;
    ctx.commit(tx).await?;
    Ok(done)
}
