//! The rollout service: start, read and abort a rollout (the admin
//! RPCs), and the loop every replica runs.
//!
//! Every replica, every `[rollout] tick_ms`: reads the fleet's record,
//! counts the calls of the step under way ([`StepCounter`]) and publishes
//! its counts, sets its gauges; then, while a rollout runs, tries to take
//! (or renew) the driver's lease (in a fleet; one process drives its own
//! rollout). The holder re-asserts the step's split (so a driver that
//! died between writing a step and setting its split leaves nothing half
//! done), judges the step on the fleet's counts and writes the decision
//! by compare and set: an abort that lands first wins, and a decision is
//! never written twice. The split of a decision
//! goes through the fleet's control state, so every replica applies it
//! within a second.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use tokio::sync::watch;

use super::{
    RolloutConfig,
    counts::{ReplicaCounts, StepCounter, StepCounts, StepKey},
    judge::{Judgement, judge},
    plan::{PlanError, RolloutPlan},
    record::{Decision, RolloutRecord, RolloutState, StepVerdict},
};
use crate::{
    Error,
    channels::{
        ChannelRouter, CircuitState, RoutingMode, WeightedSplit, probe::ProbeVerdicts, valid_name,
    },
    cluster::{DriverLease, RolloutStore},
    telemetry::Metrics,
};

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// How many times a write that lost a compare and set is tried again.
const WRITE_ATTEMPTS: usize = 3;

/// Starts, reads, aborts and drives the fleet's rollout.
pub struct Rollouts {
    router: Arc<ChannelRouter>,
    store: Arc<dyn RolloutStore>,
    /// In a fleet, the lease of the replica that drives; one process has
    /// none and drives its own rollout.
    lease: Option<DriverLease>,
    config: RolloutConfig,
    counter: Arc<StepCounter>,
    probes: Arc<ProbeVerdicts>,
    metrics: Option<Metrics>,
    driving: AtomicBool,
}

impl std::fmt::Debug for Rollouts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rollouts")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// The split of a step: the candidate at `weight` percent, the
/// incumbent at the rest.
fn split(plan: &RolloutPlan, weight: u32) -> RoutingMode {
    let entries = vec![
        (plan.incumbent.clone(), 100 - weight.min(100)),
        (plan.candidate.clone(), weight.min(100)),
    ];
    WeightedSplit::new(entries).map_or(RoutingMode::Auto, RoutingMode::Weighted)
}

/// The split a record asks for: the step's while running or completed,
/// the incumbent alone after a rollback or an abort.
fn wanted_split(record: &RolloutRecord) -> RoutingMode {
    match record.state {
        RolloutState::Running | RolloutState::Completed => split(&record.plan, record.weight()),
        RolloutState::RolledBack | RolloutState::Aborted => split(&record.plan, 0),
    }
}

impl Rollouts {
    /// The rollout service of `router`, its record in `store`; the
    /// router's step counter and `probes` are shared with the router and
    /// the probe.
    pub fn new(
        router: Arc<ChannelRouter>,
        store: Arc<dyn RolloutStore>,
        config: RolloutConfig,
        probes: Arc<ProbeVerdicts>,
    ) -> Self {
        Self {
            counter: router.step_counter(),
            router,
            store,
            lease: None,
            config,
            probes,
            metrics: None,
            driving: AtomicBool::new(false),
        }
    }

    /// The same service, setting the rollout series of `metrics`.
    pub fn with_metrics(mut self, metrics: Metrics) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// The same service, a replica of a fleet whose driver holds `lease`.
    pub fn with_lease(mut self, lease: DriverLease) -> Self {
        self.lease = Some(lease);
        self
    }

    /// Whether this replica drives the rollout this round: in a fleet,
    /// when it takes (or renews) the driver's lease; one process always
    /// does.
    async fn drives(&self) -> bool {
        match &self.lease {
            Some(lease) => lease.take(self.config.lease()).await.unwrap_or(false),
            None => true,
        }
    }

    /// The router whose split the rollout moves.
    pub fn router(&self) -> &Arc<ChannelRouter> {
        &self.router
    }

    /// The probe verdicts weights are checked against.
    pub fn probes(&self) -> &Arc<ProbeVerdicts> {
        &self.probes
    }

    /// Starts a rollout: checks the plan, refuses a channel not
    /// configured, a channel that failed its last probe (unless `force`)
    /// and a second rollout, writes the record and sets the first step's
    /// split.
    pub async fn start(&self, plan: RolloutPlan, force: bool) -> Result<RolloutRecord, Error> {
        let names: Vec<String> = self
            .router
            .snapshot()
            .channels
            .into_iter()
            .map(|c| c.name)
            .collect();
        for (field, name) in [("to", &plan.candidate), ("from", &plan.incumbent)] {
            if !names.iter().any(|n| n == name) {
                let shown = if valid_name(name) {
                    name.as_str()
                } else {
                    "<invalid name>"
                };
                return Err(Error::invalid(
                    field,
                    format!("channel `{shown}` is not configured"),
                ));
            }
        }
        plan.check(self.config.min_step())
            .map_err(|PlanError { field, why }| Error::invalid(field, why))?;
        if !force && !self.probes.may_take_weight(&plan.candidate).await? {
            return Err(Error::ChannelNotConforming(plan.candidate.clone()));
        }
        let old = self
            .store
            .load()
            .await
            .map_err(|_| Error::ClusterUnavailable)?;
        if old
            .as_deref()
            .and_then(RolloutRecord::from_text)
            .is_some_and(|r| r.state == RolloutState::Running)
        {
            return Err(Error::RolloutConflict(
                "a rollout is already running; abort it first",
            ));
        }
        let now = now_ms();
        let record = RolloutRecord {
            id: uuid::Uuid::new_v4().simple().to_string(),
            plan,
            state: RolloutState::Running,
            step: 0,
            step_started_ms: now,
            verdicts: Vec::new(),
            driver: self.store.replica(),
            started_ms: now,
        };
        let written = self
            .store
            .replace(old, record.to_text())
            .await
            .map_err(|_| Error::ClusterUnavailable)?;
        if !written {
            return Err(Error::RolloutConflict(
                "another rollout was started at the same time",
            ));
        }
        tracing::info!(
            rollout = %record.id,
            from = %record.plan.incumbent,
            to = %record.plan.candidate,
            steps = ?record.plan.steps,
            weight = record.weight(),
            "rollout started"
        );
        self.apply_split(&record).await;
        // The replica that starts a rollout drives it from the start, as
        // its record says: it takes the lease now rather than at its next
        // tick, where a replica that ticks first would take it.
        if self.drives().await && !self.driving.swap(true, Ordering::Relaxed) {
            tracing::info!(rollout = %record.id, step = 0, "this replica drives the rollout");
        }
        self.show(Some(&record));
        Ok(record)
    }

    /// The fleet's rollout, if one was ever started.
    pub async fn get(&self) -> Result<Option<RolloutRecord>, Error> {
        let text = self
            .store
            .load()
            .await
            .map_err(|_| Error::ClusterUnavailable)?;
        Ok(text.as_deref().and_then(RolloutRecord::from_text))
    }

    /// Aborts the running rollout: the incumbent back at 100%.
    pub async fn abort(&self) -> Result<RolloutRecord, Error> {
        for _ in 0..WRITE_ATTEMPTS {
            let text = self
                .store
                .load()
                .await
                .map_err(|_| Error::ClusterUnavailable)?;
            let Some(mut record) = text
                .as_deref()
                .and_then(RolloutRecord::from_text)
                .filter(|r| r.state == RolloutState::Running)
            else {
                return Err(Error::RolloutConflict("no rollout is running"));
            };
            record.state = RolloutState::Aborted;
            let written = self
                .store
                .replace(text, record.to_text())
                .await
                .map_err(|_| Error::ClusterUnavailable)?;
            if written {
                tracing::warn!(
                    rollout = %record.id,
                    to = %record.plan.candidate,
                    step = record.step,
                    "rollout aborted by an operator: the incumbent is back at 100%"
                );
                self.apply_split(&record).await;
                self.show(Some(&record));
                return Ok(record);
            }
        }
        Err(Error::RolloutConflict(
            "the rollout kept changing; try again",
        ))
    }

    /// Runs [`Rollouts::tick`] every `[rollout] tick_ms` until `stopped`.
    pub async fn run(self: Arc<Self>, mut stopped: watch::Receiver<bool>) {
        let mut every = tokio::time::interval(self.config.tick());
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let stop = tokio::select! {
                _ = every.tick() => false,
                changed = stopped.changed() => changed.is_err() || *stopped.borrow(),
            };
            if stop {
                return;
            }
            self.tick().await;
        }
    }

    /// One round: follow the record, publish this replica's counts, and
    /// drive the step when this replica holds the lease.
    pub async fn tick(&self) {
        let Ok(text) = self.store.load().await else {
            return;
        };
        let record = text.as_deref().and_then(RolloutRecord::from_text);
        let running = record.as_ref().filter(|r| r.state == RolloutState::Running);
        self.counter.follow(running.map(|r| StepKey {
            id: r.id.clone(),
            step: r.step,
            incumbent: r.plan.incumbent.clone(),
            candidate: r.plan.candidate.clone(),
        }));
        self.show(record.as_ref());
        let Some(record) = running else {
            self.driving.store(false, Ordering::Relaxed);
            return;
        };
        if let Some((key, counts)) = self.counter.snapshot() {
            let text = serde_json::to_string(&counts).unwrap_or_default();
            let _ = self.store.put_counts(&key.id, key.step, text).await;
        }
        let held = self.drives().await;
        let was = self.driving.swap(held, Ordering::Relaxed);
        if !held {
            return;
        }
        if !was {
            tracing::info!(rollout = %record.id, step = record.step, "this replica drives the rollout");
        }
        self.drive(text, record.clone()).await;
    }

    /// Sums every replica's counts of `step`.
    async fn fleet_counts(&self, id: &str, step: u32) -> Option<ReplicaCounts> {
        let texts = self.store.counts(id, step).await.ok()?;
        let mut sum = ReplicaCounts::default();
        for text in texts {
            if let Ok(counts) = serde_json::from_str::<ReplicaCounts>(&text) {
                sum.merge(&counts);
            }
        }
        Some(sum)
    }

    async fn drive(&self, text: Option<String>, mut record: RolloutRecord) {
        if self.router.mode() != wanted_split(&record) {
            self.apply_split(&record).await;
        }
        let Some(step) = self.fleet_counts(&record.id, record.step).await else {
            return;
        };
        let mut incumbent_rollout = StepCounts::default();
        for earlier in 0..=record.step {
            if let Some(c) = self.fleet_counts(&record.id, earlier).await {
                incumbent_rollout.merge(&c.incumbent);
            }
        }
        let circuit_open = self
            .router
            .snapshot()
            .channels
            .iter()
            .any(|c| c.name == record.plan.candidate && c.circuit == CircuitState::Open);
        let elapsed = Duration::from_millis(now_ms().saturating_sub(record.step_started_ms));
        let judgement = judge(
            &record.plan,
            &step.candidate,
            &step.incumbent,
            &incumbent_rollout,
            elapsed,
            circuit_open,
        );
        let Judgement::Decided {
            decision,
            breach,
            detail,
        } = judgement
        else {
            return;
        };
        let weight = record.weight();
        record.verdicts.push(StepVerdict {
            step: record.step,
            weight,
            decision,
            breach,
            detail: detail.clone(),
            candidate: step.candidate,
            incumbent: if step.incumbent.verdicts() > 0 {
                step.incumbent
            } else {
                incumbent_rollout
            },
            at_ms: now_ms(),
        });
        record.driver = self.store.replica();
        let last =
            usize::try_from(record.step + 1).unwrap_or(usize::MAX) >= record.plan.steps.len();
        match decision {
            Decision::RollBack => record.state = RolloutState::RolledBack,
            Decision::Advance if last => record.state = RolloutState::Completed,
            Decision::Advance => {
                record.step += 1;
                record.step_started_ms = now_ms();
            }
        }
        if decision == Decision::RollBack {
            // Back to the incumbent before anyone can read the rollback:
            // once GetRollout says rolled back, no new session goes to
            // the candidate. (An abort that lands first asks the same.)
            self.apply_split(&record).await;
        }
        let Ok(true) = self.store.replace(text, record.to_text()).await else {
            // An abort or another driver got there first: its record stands.
            return;
        };
        let breach_label = breach.map_or("none", |b| b.label());
        if decision == Decision::RollBack {
            tracing::warn!(
                rollout = %record.id,
                to = %record.plan.candidate,
                step = record.step,
                weight,
                breach = breach_label,
                detail = %detail,
                "rollout rolled back: the incumbent is back at 100%"
            );
        } else {
            tracing::info!(
                rollout = %record.id,
                to = %record.plan.candidate,
                step = record.step,
                weight,
                state = record.state.label(),
                next_weight = record.weight(),
                detail = %detail,
                "rollout step passed"
            );
        }
        if let Some(m) = &self.metrics {
            m.record_rollout_verdict(decision.label(), breach_label);
        }
        if decision == Decision::Advance {
            self.apply_split(&record).await;
            // An abort written between our write and our split must not
            // be undone by it: set the split of whatever stands now.
            if let Ok(Some(now)) = self.get().await {
                if now.state != RolloutState::Running && now.id == record.id {
                    self.apply_split(&now).await;
                }
            }
        }
        self.show(Some(&record));
    }

    /// Sets the split `record` asks for, for the whole fleet. A failure
    /// (Redis down) is logged; the driver sets it again on its next round.
    async fn apply_split(&self, record: &RolloutRecord) {
        let mode = wanted_split(record);
        if let Err(e) = self.router.change_mode(mode.clone()).await {
            tracing::warn!(rollout = %record.id, mode = %mode, error = %e, "rollout split not applied; tried again next round");
        }
    }

    fn show(&self, record: Option<&RolloutRecord>) {
        if let Some(m) = &self.metrics {
            match record {
                Some(r) => {
                    let share = match r.state {
                        RolloutState::Running | RolloutState::Completed => r.weight(),
                        RolloutState::RolledBack | RolloutState::Aborted => 0,
                    };
                    m.set_rollout(r.state.label(), share);
                }
                None => m.set_rollout("", 0),
            }
        }
    }
}
