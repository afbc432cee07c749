//! Leader election on a `coordination.k8s.io/v1` Lease, with client-go's algorithm: a
//! candidate takes the lease when it is free or its holder has not renewed it for
//! `leaseDuration` (judged by when this process last saw the record change, so clocks
//! need not agree); the leader renews every `retryPeriod` and gives up leadership when it
//! could not renew for `renewDeadline`; on shutdown it releases the lease so another
//! candidate takes over at once. Writes carry the lease's resourceVersion, so two
//! candidates cannot both win: the API server answers the loser with 409 Conflict.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::PostParams;
use kube::{Api, Client};

/// client-go's jitter factor for the acquire loop.
pub const JITTER_FACTOR: f64 = 1.2;

/// Where the lease is and how it is held.
#[derive(Debug, Clone)]
pub struct LeaseSettings {
    /// The Lease's name (`leaderElection.resourceName`).
    pub name: String,
    /// Its namespace (`leaderElection.resourceNamespace`).
    pub namespace: String,
    /// This candidate's identity (the holder identity written to the lease).
    pub identity: String,
    /// How long a lease is valid without renewal.
    pub lease_duration: Duration,
    /// How long the leader keeps trying to renew before it steps down.
    pub renew_deadline: Duration,
    /// Wait between tries.
    pub retry_period: Duration,
}

/// How holding the lease ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HoldEnd {
    /// Renewal failed for `renewDeadline`: leadership is lost.
    Lost,
    /// Asked to stop while still leading.
    Stopped,
}

/// One candidate.
#[derive(Debug)]
pub struct LeaderElector {
    api: Api<Lease>,
    settings: LeaseSettings,
    /// The lease as last read or written (its resourceVersion is used for updates).
    lease: Option<Lease>,
    /// The record last observed, and when this process observed it.
    observed: Option<(LeaseSpec, Instant)>,
}

fn holder(spec: &LeaseSpec) -> &str {
    spec.holder_identity.as_deref().unwrap_or("")
}

impl LeaderElector {
    /// A candidate for the lease in `settings`.
    pub fn new(client: Client, settings: LeaseSettings) -> Self {
        Self {
            api: Api::namespaced(client, &settings.namespace),
            settings,
            lease: None,
            observed: None,
        }
    }

    /// The settings.
    pub fn settings(&self) -> &LeaseSettings {
        &self.settings
    }

    /// Whether the last observed record names this candidate.
    pub fn is_leader(&self) -> bool {
        self.observed
            .as_ref()
            .is_some_and(|(spec, _)| holder(spec) == self.settings.identity)
    }

    /// The holder of the last observed record ("" when free or unknown).
    pub fn observed_holder(&self) -> String {
        self.observed
            .as_ref()
            .map(|(s, _)| holder(s).to_string())
            .unwrap_or_default()
    }

    fn lease_valid(&self, now: Instant) -> bool {
        self.observed.as_ref().is_some_and(|(spec, at)| {
            let secs = spec.lease_duration_seconds.unwrap_or(0).max(0) as u64;
            *at + Duration::from_secs(secs) > now
        })
    }

    fn observe(&mut self, lease: Lease) {
        let spec = lease.spec.clone().unwrap_or_default();
        let changed = self.observed.as_ref().is_none_or(|(old, _)| *old != spec);
        if changed {
            self.observed = Some((spec, Instant::now()));
        }
        self.lease = Some(lease);
    }

    fn record(&self, acquire: Option<MicroTime>, transitions: i32) -> LeaseSpec {
        let now = MicroTime(Timestamp::now());
        LeaseSpec {
            holder_identity: Some(self.settings.identity.clone()),
            lease_duration_seconds: Some(self.settings.lease_duration.as_secs().max(1) as i32),
            acquire_time: Some(acquire.unwrap_or_else(|| now.clone())),
            renew_time: Some(now),
            lease_transitions: Some(transitions),
            ..Default::default()
        }
    }

    async fn update(&mut self, spec: LeaseSpec) -> Result<(), kube::Error> {
        let mut lease = self.lease.clone().unwrap_or_default();
        lease.spec = Some(spec);
        let written = self
            .api
            .replace(&self.settings.name, &PostParams::default(), &lease)
            .await?;
        self.observe(written);
        Ok(())
    }

    /// One try to take or renew the lease; true when this candidate holds it afterwards.
    pub async fn try_acquire_or_renew(&mut self) -> bool {
        let now = Instant::now();
        // Fast path: the leader renews on top of what it wrote last.
        if self.is_leader() && self.lease_valid(now) {
            let (acquire, transitions) = self
                .observed
                .as_ref()
                .map(|(s, _)| (s.acquire_time.clone(), s.lease_transitions.unwrap_or(0)))
                .unwrap_or((None, 0));
            let spec = self.record(acquire, transitions);
            match self.update(spec).await {
                Ok(()) => return true,
                Err(e) => {
                    tracing::warn!(error = %e, "renewing the lease optimistically failed; reading it again");
                }
            }
        }
        let current = match self.api.get_opt(&self.settings.name).await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(lease = %self.settings.name, error = %e, "reading the lease");
                return false;
            }
        };
        let Some(current) = current else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.settings.name.clone()),
                    namespace: Some(self.settings.namespace.clone()),
                    ..Default::default()
                },
                spec: Some(self.record(None, 0)),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(created) => {
                    self.observe(created);
                    true
                }
                Err(e) => {
                    tracing::debug!(error = %e, "creating the lease");
                    false
                }
            };
        };
        self.observe(current);
        let (old_holder, old_acquire, old_transitions) = self
            .observed
            .as_ref()
            .map(|(s, _)| {
                (
                    holder(s).to_string(),
                    s.acquire_time.clone(),
                    s.lease_transitions.unwrap_or(0),
                )
            })
            .unwrap_or_default();
        if !old_holder.is_empty() && self.lease_valid(now) && !self.is_leader() {
            tracing::trace!(holder = %old_holder, "lease is held and has not expired");
            return false;
        }
        let spec = if self.is_leader() {
            self.record(old_acquire, old_transitions)
        } else {
            self.record(None, old_transitions + 1)
        };
        match self.update(spec).await {
            Ok(()) => true,
            Err(e) => {
                tracing::debug!(error = %e, "updating the lease");
                false
            }
        }
    }

    /// Tries every `retryPeriod` (jittered) until the lease is taken (true) or `stop`
    /// completes (false).
    pub async fn acquire(&mut self, stop: impl std::future::Future<Output = ()>) -> bool {
        tokio::pin!(stop);
        let mut last_holder = String::new();
        loop {
            if self.try_acquire_or_renew().await {
                tracing::info!(lease = %format!("{}/{}", self.settings.namespace, self.settings.name), identity = %self.settings.identity, "successfully acquired lease");
                return true;
            }
            let h = self.observed_holder();
            if h != last_holder {
                tracing::info!(leader = %h, "new leader elected");
                last_holder = h;
            }
            let wait = self
                .settings
                .retry_period
                .mul_f64(1.0 + fastrand::f64() * (JITTER_FACTOR - 1.0));
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = &mut stop => return false,
            }
        }
    }

    /// Renews every `retryPeriod` until renewal fails for `renewDeadline` (Lost) or `stop`
    /// completes (Stopped). Each renewal round is bounded by the deadline, as client-go's.
    pub async fn hold(&mut self, stop: impl std::future::Future<Output = ()>) -> HoldEnd {
        tokio::pin!(stop);
        loop {
            tokio::select! {
                _ = tokio::time::sleep(self.settings.retry_period) => {}
                _ = &mut stop => return HoldEnd::Stopped,
            }
            let deadline = tokio::time::Instant::now() + self.settings.renew_deadline;
            let renewed = loop {
                match tokio::time::timeout_at(deadline, self.try_acquire_or_renew()).await {
                    Ok(true) => break true,
                    Ok(false) => {}
                    Err(_) => break false,
                }
                let next = tokio::time::Instant::now() + self.settings.retry_period;
                if next >= deadline {
                    break false;
                }
                tokio::select! {
                    _ = tokio::time::sleep_until(next) => {}
                    _ = &mut stop => return HoldEnd::Stopped,
                }
            };
            if !renewed {
                tracing::error!(lease = %self.settings.name, "failed to renew the lease within the renew deadline");
                // Whatever was observed, this candidate does not lead any more.
                self.observed = None;
                return HoldEnd::Lost;
            }
        }
    }

    /// Gives the lease up (holder cleared, duration 1 s) so another candidate can take it
    /// at once. True when released or not held.
    pub async fn release(&mut self) -> bool {
        if !self.is_leader() {
            return true;
        }
        let now = MicroTime(Timestamp::now());
        let transitions = self
            .observed
            .as_ref()
            .and_then(|(s, _)| s.lease_transitions)
            .unwrap_or(0);
        let spec = LeaseSpec {
            holder_identity: Some(String::new()),
            lease_duration_seconds: Some(1),
            acquire_time: Some(now.clone()),
            renew_time: Some(now),
            lease_transitions: Some(transitions),
            ..Default::default()
        };
        match tokio::time::timeout(self.settings.renew_deadline, self.update(spec)).await {
            Ok(Ok(())) => {
                tracing::info!(lease = %self.settings.name, "released the lease");
                true
            }
            Ok(Err(e)) => {
                tracing::error!(error = %e, "releasing the lease");
                false
            }
            Err(_) => {
                tracing::error!("releasing the lease timed out");
                false
            }
        }
    }
}
