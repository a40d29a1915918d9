//! Attach leases (`pamctl attach RUN`): an interactive lease on a live run.
//! One holder at a time; a lease expires `ttl` after it was acquired or last
//! renewed; while held, the holder's typed lines are queued here and handed
//! to the run's worker with the desired set (the worker types them into the
//! pane with `tmux send-keys -l`). The pane streams back through the output
//! snapshot cache (`GET …/runs/{name}/output`).
//!
//! Input accepted under a valid lease is delivered even if the lease is
//! released before the worker picks it up.
//!
//! In memory, like operator signals: a pamd restart drops every lease (and
//! any input not yet handed out); the holder's next renew gets 404 and
//! `pamctl attach` says so. Acquire, release and expiry are journaled
//! (`run.lease_acquired`, `run.lease_released` with `reason`), each payload
//! carrying run_id and attempt.
//!
//! A lease holds its acquirer's token ([`super::revocation::Hold`]):
//! revoking the token releases the lease within a second
//! ([`Leases::take_revoked`], journaled with `reason: revoked`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::revocation::Hold;

/// The default lease time-to-live; `pamctl attach` renews well within it.
pub const DEFAULT_TTL: Duration = Duration::from_secs(30);
/// The longest TTL an acquirer may ask for.
pub const MAX_TTL: Duration = Duration::from_secs(600);
/// At most this many input lines wait per run (a worker that is not
/// fetching its desired set must not make pamd grow without bound).
const MAX_QUEUED_INPUT: usize = 1000;

/// One held lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    pub id: Uuid,
    pub run_id: Uuid,
    pub attempt: i32,
    pub holder: String,
    pub ttl: Duration,
    pub acquired_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
}

/// Why an operation on a lease was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaseError {
    /// Someone else holds an unexpired lease on the run.
    Held(Lease),
    /// No lease with that id on the run (expired, released, or pamd
    /// restarted).
    NotHeld,
    /// Too much input queued for the run.
    Backlog,
}

#[derive(Default)]
struct Inner {
    leases: HashMap<Uuid, Lease>,
    /// The acquirer's token per lease id (none in unit tests).
    tokens: HashMap<Uuid, Hold>,
    input: HashMap<Uuid, Vec<(i32, String)>>,
}

impl Inner {
    /// Removes the lease on `run_id` (and lets go of its token).
    fn remove(&mut self, run_id: Uuid) -> Option<Lease> {
        let l = self.leases.remove(&run_id)?;
        self.tokens.remove(&l.id);
        Some(l)
    }
}

/// All leases and queued input, shared by the API handlers.
#[derive(Clone, Default)]
pub struct Leases(Arc<Mutex<Inner>>);

fn expiry(now: DateTime<Utc>, ttl: Duration) -> DateTime<Utc> {
    now + chrono::Duration::from_std(ttl).unwrap_or(chrono::Duration::seconds(30))
}

impl Leases {
    /// Acquires the lease on `run_id` for `holder` (holding the acquirer's
    /// `token`), unless someone holds an unexpired one. Returns the new
    /// lease and, when an expired lease was replaced, that lease (to
    /// journal its release).
    pub fn acquire(
        &self,
        run_id: Uuid,
        attempt: i32,
        holder: &str,
        token: Option<Hold>,
        ttl: Duration,
        now: DateTime<Utc>,
    ) -> Result<(Lease, Option<Lease>), LeaseError> {
        let mut g = self.0.lock().unwrap();
        let expired = match g.leases.get(&run_id) {
            Some(l) if l.expires_at > now => return Err(LeaseError::Held(l.clone())),
            Some(_) => g.remove(run_id),
            None => None,
        };
        let lease = Lease {
            id: Uuid::new_v4(),
            run_id,
            attempt,
            holder: holder.to_string(),
            ttl,
            acquired_at: now,
            expires_at: expiry(now, ttl),
        };
        g.leases.insert(run_id, lease.clone());
        if let Some(t) = token {
            g.tokens.insert(lease.id, t);
        }
        Ok((lease, expired))
    }

    fn held(
        g: &mut Inner,
        run_id: Uuid,
        lease_id: Uuid,
        now: DateTime<Utc>,
    ) -> Result<&mut Lease, LeaseError> {
        match g.leases.get_mut(&run_id) {
            Some(l) if l.id == lease_id && l.expires_at > now => Ok(l),
            _ => Err(LeaseError::NotHeld),
        }
    }

    /// Extends the lease by its TTL from now.
    pub fn renew(
        &self,
        run_id: Uuid,
        lease_id: Uuid,
        now: DateTime<Utc>,
    ) -> Result<Lease, LeaseError> {
        let mut g = self.0.lock().unwrap();
        let l = Self::held(&mut g, run_id, lease_id, now)?;
        l.expires_at = expiry(now, l.ttl);
        Ok(l.clone())
    }

    /// Releases the lease. Input accepted while it was held is still
    /// handed out (a `pamctl attach` fed from a pipe sends its lines and
    /// releases at once).
    pub fn release(
        &self,
        run_id: Uuid,
        lease_id: Uuid,
        now: DateTime<Utc>,
    ) -> Result<Lease, LeaseError> {
        let mut g = self.0.lock().unwrap();
        Self::held(&mut g, run_id, lease_id, now)?;
        Ok(g.remove(run_id).expect("held"))
    }

    /// Queues a typed line for the run's worker.
    pub fn push_input(
        &self,
        run_id: Uuid,
        lease_id: Uuid,
        text: String,
        now: DateTime<Utc>,
    ) -> Result<(), LeaseError> {
        let mut g = self.0.lock().unwrap();
        let attempt = Self::held(&mut g, run_id, lease_id, now)?.attempt;
        let q = g.input.entry(run_id).or_default();
        if q.len() >= MAX_QUEUED_INPUT {
            return Err(LeaseError::Backlog);
        }
        q.push((attempt, text));
        Ok(())
    }

    /// Takes the input queued for this attempt of the run (other attempts'
    /// input is dropped).
    pub fn take_input(&self, run_id: Uuid, attempt: i32) -> Vec<String> {
        let mut g = self.0.lock().unwrap();
        g.input
            .remove(&run_id)
            .unwrap_or_default()
            .into_iter()
            .filter(|(a, _)| *a == attempt)
            .map(|(_, t)| t)
            .collect()
    }

    /// The current (unexpired) lease on the run, if any.
    pub fn get(&self, run_id: Uuid, now: DateTime<Utc>) -> Option<Lease> {
        let g = self.0.lock().unwrap();
        g.leases
            .get(&run_id)
            .filter(|l| l.expires_at > now)
            .cloned()
    }

    /// Removes and returns every lease expired at `now` (to journal).
    pub fn take_expired(&self, now: DateTime<Utc>) -> Vec<Lease> {
        let mut g = self.0.lock().unwrap();
        let gone: Vec<Uuid> = g
            .leases
            .values()
            .filter(|l| l.expires_at <= now)
            .map(|l| l.run_id)
            .collect();
        gone.into_iter().filter_map(|run| g.remove(run)).collect()
    }

    /// Removes and returns every lease whose acquirer's token has been
    /// revoked (to journal).
    pub fn take_revoked(&self) -> Vec<Lease> {
        let mut g = self.0.lock().unwrap();
        let gone: Vec<Uuid> = g
            .leases
            .values()
            .filter(|l| g.tokens.get(&l.id).is_some_and(Hold::is_revoked))
            .map(|l| l.run_id)
            .collect();
        gone.into_iter().filter_map(|run| g.remove(run)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_700_000_000 + s, 0).unwrap()
    }

    #[test]
    fn one_holder_until_expiry_renew_extends() {
        let l = Leases::default();
        let run = Uuid::new_v4();
        let ttl = Duration::from_secs(10);
        let (a, _) = l.acquire(run, 1, "alice", None, ttl, t(0)).unwrap();
        match l.acquire(run, 1, "bob", None, ttl, t(5)) {
            Err(LeaseError::Held(h)) => assert_eq!(h.holder, "alice"),
            other => panic!("{other:?}"),
        }
        l.renew(run, a.id, t(9)).unwrap();
        assert!(matches!(
            l.acquire(run, 1, "bob", None, ttl, t(15)),
            Err(LeaseError::Held(_))
        ));
        assert!(l.take_expired(t(18)).is_empty());
        let gone = l.take_expired(t(19));
        assert_eq!(gone.len(), 1);
        assert_eq!(gone[0].holder, "alice");
        assert_eq!(l.renew(run, a.id, t(19)), Err(LeaseError::NotHeld));
        let (b, expired) = l.acquire(run, 1, "bob", None, ttl, t(20)).unwrap();
        assert!(expired.is_none());
        assert_eq!(l.get(run, t(21)).unwrap().id, b.id);
    }

    #[test]
    fn input_needs_the_lease_and_goes_to_its_attempt() {
        let l = Leases::default();
        let run = Uuid::new_v4();
        let (a, _) = l
            .acquire(run, 2, "alice", None, Duration::from_secs(10), t(0))
            .unwrap();
        assert_eq!(
            l.push_input(run, Uuid::new_v4(), "x".into(), t(1)),
            Err(LeaseError::NotHeld)
        );
        l.push_input(run, a.id, "one".into(), t(1)).unwrap();
        l.push_input(run, a.id, "two".into(), t(1)).unwrap();
        assert!(l.take_input(run, 1).is_empty());
        l.push_input(run, a.id, "three".into(), t(1)).unwrap();
        assert_eq!(l.take_input(run, 2), vec!["three".to_string()]);
        assert!(l.take_input(run, 2).is_empty());
        l.push_input(run, a.id, "four".into(), t(1)).unwrap();
        l.release(run, a.id, t(2)).unwrap();
        assert_eq!(l.release(run, a.id, t(2)), Err(LeaseError::NotHeld));
        // Accepted before the release: still delivered.
        assert_eq!(l.take_input(run, 2), vec!["four".to_string()]);
        assert!(l.get(run, t(2)).is_none());
    }
}
