//! A host's desired set, built in one place for every answer a worker
//! gets: a heartbeat's and a resync's (many hosts in one batch,
//! [`super::heartbeats`]), a read a change asked for ([`read_now`]) and a
//! claim's ([`claimed`]).
//!
//! A host's set is its live runs ([`RunStatus::is_live`]), each as
//! [`desired_run`]; while a run is spawning, with its environment and
//! workspace, opened here in the read's transaction ([`with_env`]); its
//! operator signals (all of them, every time: the worker delivers each id
//! once) and the attach input typed since the last read (handed out once).

use std::collections::HashMap;

use pam_manifests::protocol::{DesiredRun, DesiredSet};
use pam_manifests::state::RunStatus;
use pam_store::prelude::*;
use pam_store::{Host, Run, StoreResult};
use uuid::Uuid;

use super::{Fleet, FleetError};
use crate::ctx::Ctx;
use crate::rules::runs::{self, env};
use crate::rules::secrets::{Keyring, ResolveError};

/// A run as its worker gets it, without what is read from the store
/// ([`with_env`]) or handed out per read (signals, input).
pub fn desired_run(r: &Run) -> DesiredRun {
    let command = r.meta.spec.get("command").and_then(|c| {
        c.as_array().map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
    });
    DesiredRun {
        run_id: r.id,
        attempt: r.attempt,
        session_name: r.session_name.clone(),
        provider: r.provider.clone(),
        prompt: r.prompt.clone(),
        cwd: r.cwd.clone(),
        command,
        env: Default::default(),
        env_error: None,
        stop: r.stop_requested,
        signals: Vec::new(),
        input: Vec::new(),
        workspace: None,
        permissions: r.permissions.as_ref().map(|p| p.permissions.clone()),
    }
}

/// The desired sets of `hosts` read in `tx` (one statement for their
/// runs, one for their attach input): the caller commits, as the input
/// is taken.
pub(super) async fn sets_of(
    fleet: &Fleet,
    ring: &Keyring,
    tx: &mut dyn Tx,
    hosts: &[&Host],
) -> StoreResult<HashMap<Uuid, DesiredSet>> {
    let ids: Vec<Uuid> = hosts.iter().map(|h| h.id).collect();
    let mut sets: HashMap<Uuid, DesiredSet> = HashMap::new();
    for r in tx.live_runs_on_hosts(&ids).await? {
        let d = with_env(tx, ring, &r).await?;
        let host = r.host_id.expect("a live run has a host");
        sets.entry(host).or_default().runs.push(d);
    }
    // The attach input of every run read, in the read's transaction (none
    // when no host has a run).
    let live: Vec<(Uuid, i32)> = sets
        .values()
        .flat_map(|s| &s.runs)
        .map(|r| (r.run_id, r.attempt))
        .collect();
    let mut input = if live.is_empty() {
        HashMap::new()
    } else {
        tx.take_attach_input(&live).await?
    };
    let signals = fleet.signals();
    for h in hosts {
        let set = sets.entry(h.id).or_default();
        let live = set.runs.iter().map(|r| r.run_id).collect();
        signals.forget_ended(h.id, &live);
        for r in &mut set.runs {
            r.signals = signals.for_run(r.run_id, r.attempt);
            r.input = input.remove(&r.run_id).unwrap_or_default();
        }
    }
    Ok(sets)
}

/// The desired set of host `name`, read now (a change asked for it).
pub(super) async fn read_now(
    fleet: &Fleet,
    ctx: &Ctx,
    name: &str,
) -> Result<DesiredSet, FleetError> {
    let mut tx = ctx.store.begin().await?;
    let host = tx
        .by_name::<Host>((), name)
        .await?
        .ok_or_else(|| FleetError::NotRegistered(name.to_string()))?;
    let mut sets = sets_of(fleet, &ctx.secrets, tx.as_mut(), &[&host]).await?;
    let set = sets.remove(&host.id).unwrap_or_default();
    if !set.runs.is_empty() {
        // Attach input was taken.
        ctx.commit(tx).await?;
    }
    Ok(set)
}

/// The runs a claim took, as their worker gets them: a transaction only
/// when one of them reads its environment or workspace (a claim of plain
/// runs costs no second one). New runs have no signals or input yet.
pub(super) async fn claimed(ctx: &Ctx, runs: &[Run]) -> Result<DesiredSet, FleetError> {
    let mut set = DesiredSet {
        runs: Vec::with_capacity(runs.len()),
    };
    let mut tx = None;
    for r in runs {
        if !reads_store(r) {
            set.runs.push(desired_run(r));
            continue;
        }
        let tx = match &mut tx {
            Some(tx) => tx,
            None => tx.insert(ctx.store.begin().await?),
        };
        set.runs.push(with_env(tx.as_mut(), &ctx.secrets, r).await?);
    }
    Ok(set)
}

/// Whether [`with_env`] may read the store for `r`; when not, it is
/// [`desired_run`] alone.
fn reads_store(r: &Run) -> bool {
    let (vars, from) = env::env_of(&r.meta.spec);
    r.status == RunStatus::Spawning
        && (runs::workspace::may_have(r) || !vars.is_empty() || !from.is_empty())
}

/// A run as its worker gets it, with its environment while it is
/// spawning — the attempt about to start, on the host it was claimed for;
/// never once it runs. Values are opened here, in the read's transaction.
/// A Secret or key missing by now, or unreadable, is the spawn's failure
/// (`envError`): the run never starts without it; so is a workspace that
/// cannot be prepared.
async fn with_env(tx: &mut dyn Tx, ring: &Keyring, r: &Run) -> StoreResult<DesiredRun> {
    let mut d = desired_run(r);
    if r.status != RunStatus::Spawning {
        return Ok(d);
    }
    match runs::workspace::order(tx, r).await? {
        Some(Ok((mut order, secret_ref))) => {
            if let Some(s) = secret_ref {
                match repository_credentials(tx, ring, r, &s).await {
                    Ok(c) => order.credentials = Some(c),
                    Err(ResolveError::Store(e)) => return Err(e),
                    Err(e) => {
                        d.env_error = Some(format!("the repository's credentials: {e}"));
                        return Ok(d);
                    }
                }
            }
            d.workspace = Some(order);
        }
        Some(Err(why)) => d.env_error = Some(why),
        None => {}
    }
    let (vars, from) = env::env_of(&r.meta.spec);
    if vars.is_empty() && from.is_empty() {
        return Ok(d);
    }
    match env::environment(tx, ring, r).await {
        Ok(values) => d.env = values,
        Err(env::EnvError::Resolve(ResolveError::Store(e))) => return Err(e),
        Err(e) => d.env_error = Some(e.to_string()),
    }
    Ok(d)
}

/// The two keys of a Project's repository `secretRef`, opened in the
/// read's transaction like a run's environment.
async fn repository_credentials(
    tx: &mut dyn Tx,
    ring: &Keyring,
    r: &Run,
    s: &pam_manifests::kinds::RepositorySecretRef,
) -> Result<pam_manifests::protocol::GitCredentials, ResolveError> {
    let mut key = async |key: &str| {
        crate::rules::secrets::resolve(tx, ring, r.project_id, s.name.as_str(), key)
            .await
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
    };
    let username = key(&s.username_key).await?;
    let password = key(&s.password_key).await?;
    Ok(pam_manifests::protocol::GitCredentials { username, password })
}
