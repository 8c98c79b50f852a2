//! What only a fleet does: a replica's work with the other replicas,
//! which a single process simply does not have.
//!
//! ```text
//! channels::ChannelRouter --> FleetControl      control.rs       routing mode, drains, hold: changed for all, read whole
//! channels::FleetShare -----> FleetFigures      figures.rs       per-minute vendor figures of every replica
//! events::WebhookReceiver --> FleetNotices      notices.rs       completion notices told to the other replicas
//! events::JourneyWatches ---> ReadTurns         read_turns.rs    whose turn to read a result; the word it is final
//! channels::Rollouts -------> DriverLease       driver_lease.rs  which replica drives the rollout's steps
//!                             (the writers')    event_log.rs     {p}{fleet}:events: what an entry holds, appended
//! server::replica <---------- Fleet::subscribe  supervisor.rs    FleetEvent: the others' notices and control changes
//! ```
//!
//! A single process has no [`Fleet`] (`Shared::fleet` is `None`): its
//! router's control state and figures are the whole truth, its watches
//! read a result whenever they need it, it drives its own rollout, and
//! there is nobody to tell of a notice. What a single process does keep (journey records, bindings,
//! dedupe, progress marks, the rollout, probe verdicts, usage) is in the
//! stores every tier implements, beside this module.
//!
//! Everything here lives on the fleet's Redis ([`RedisConn`]) and answers
//! within its command timeout.

pub mod control;
pub mod driver_lease;
mod event_log;
pub mod figures;
pub mod notices;
pub mod read_turns;
mod supervisor;

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use tokio::{sync::broadcast, task::AbortHandle};

pub use self::supervisor::{FleetEvent, SeedFn};
use self::{
    control::FleetControl, driver_lease::DriverLease, figures::FleetFigures, notices::FleetNotices,
    read_turns::ReadTurns,
};
use super::redis::RedisConn;

/// A replica's handle on its fleet. Cheap to clone; hand each user the
/// part it needs.
#[derive(Debug, Clone)]
pub struct Fleet {
    conn: RedisConn,
    control: FleetControl,
    figures: FleetFigures,
    notices: FleetNotices,
    read_turns: ReadTurns,
    driver_lease: DriverLease,
    /// What the supervisor tells this replica.
    events: broadcast::Sender<FleetEvent>,
    /// The supervisor's task, once started.
    supervisor: Arc<Mutex<Option<AbortHandle>>>,
}

impl Fleet {
    /// The fleet on `conn`; its figures' minutes live
    /// `figures_retention`.
    pub(super) fn new(conn: RedisConn, figures_retention: Duration) -> Self {
        let notices = FleetNotices::new(conn.clone());
        Self {
            control: FleetControl::new(conn.clone()),
            figures: FleetFigures::new(conn.clone(), figures_retention),
            read_turns: ReadTurns::new(conn.clone(), notices.clone()),
            driver_lease: DriverLease::new(conn.clone()),
            notices,
            conn,
            events: broadcast::channel(1024).0,
            supervisor: Arc::default(),
        }
    }

    /// The fleet's channel control state.
    pub fn control(&self) -> &FleetControl {
        &self.control
    }

    /// The fleet's vendor figures.
    pub fn figures(&self) -> &FleetFigures {
        &self.figures
    }

    /// Completion notices told to the other replicas.
    pub fn notices(&self) -> &FleetNotices {
        &self.notices
    }

    /// Whose turn it is to read a watched journey's result.
    pub fn read_turns(&self) -> &ReadTurns {
        &self.read_turns
    }

    /// Which replica drives the guarded rollout's steps.
    pub fn driver_lease(&self) -> &DriverLease {
        &self.driver_lease
    }

    /// The connection the fleet's stores share with it.
    pub(super) fn conn(&self) -> &RedisConn {
        &self.conn
    }

    /// What the other replicas do, from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<FleetEvent> {
        self.events.subscribe()
    }

    /// Runs the fleet's supervisor until [`Fleet::stop`]: the event
    /// stream, control state on (re)connection, reconnection with
    /// backoff. `seed` is this replica's own control state, written when
    /// Redis holds none. Subscribe before starting to see the first
    /// [`FleetEvent::Control`].
    pub fn start(&self, seed: SeedFn) {
        let task = tokio::spawn(supervisor::supervise(
            self.conn.clone(),
            self.control.clone(),
            seed,
            self.events.clone(),
        ));
        *crate::sync::lock(&self.supervisor) = Some(task.abort_handle());
    }

    /// Waits until Redis answers, at most `timeout`; returns whether it
    /// does.
    pub async fn wait_up(&self, timeout: Duration) -> bool {
        self.conn.wait_up(timeout).await
    }

    /// True while Redis answers.
    pub fn is_up(&self) -> bool {
        self.conn.is_up()
    }

    /// Stops the supervisor (the gateway is shutting down).
    pub fn stop(&self) {
        if let Some(task) = crate::sync::lock(&self.supervisor).take() {
            task.abort();
        }
    }

    /// What a serving thread runs as it starts, so that its Redis commands
    /// stay on its own event loop ([`RedisConn::install_thread`]).
    pub fn thread_setup(&self) -> Arc<dyn Fn() + Send + Sync> {
        let conn = self.conn.clone();
        Arc::new(move || conn.install_thread())
    }
}
