//! What the soak saw (every RPC's outcome, by method) and the one-shot
//! faults it installs on the sandbox.

use std::{
    collections::BTreeMap,
    sync::{
        Mutex,
        atomic::{AtomicU64, Ordering},
    },
};

use idgate::{
    domain::Operation,
    error::{ERROR_DOMAIN, Reason},
    sandbox::{FaultAction, FaultPhase, FaultRule, SandboxHandle},
};
use tonic_types::StatusExt as _;

/// A tiny xorshift: reproducible faults without a dependency.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// What the run saw.
#[derive(Default)]
pub struct Tally {
    /// `code/reason` of every RPC.
    pub outcomes: Mutex<BTreeMap<String, u64>>,
    /// RPCs whose error had no idgate `ErrorInfo` or an undocumented reason.
    pub undocumented: Mutex<Vec<String>>,
    /// RPCs sent, by method.
    pub sent: Mutex<BTreeMap<&'static str, u64>>,
    pub faults: AtomicU64,
    pub completed: AtomicU64,
    /// Callers on appkeys the gateway never issued.
    pub fake_callers: AtomicU64,
    /// `WatchJourney` streams opened, then dropped before their end.
    pub abandoned: AtomicU64,
}

impl Tally {
    pub fn record<T>(&self, method: &'static str, result: &Result<T, tonic::Status>) {
        *crate_lock(&self.sent).entry(method).or_default() += 1;
        let key = match result {
            Ok(_) => format!("{method} OK"),
            Err(status) => {
                let info = status.get_details_error_info();
                let documented = info.as_ref().is_some_and(|i| {
                    i.domain == ERROR_DOMAIN && Reason::ALL.iter().any(|r| r.as_str() == i.reason)
                });
                let reason = info.map(|i| i.reason).unwrap_or_else(|| "-".into());
                let key = format!("{method} {:?}/{reason}", status.code());
                if !documented {
                    crate_lock(&self.undocumented).push(key.clone());
                }
                key
            }
        };
        *crate_lock(&self.outcomes).entry(key).or_default() += 1;
    }
}

pub fn crate_lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Installs, with the configured chance, a one-shot fault on `op`.
pub fn maybe_fault(
    sandbox: &SandboxHandle,
    rng: &Mutex<Rng>,
    percent: u64,
    op: Operation,
    tally: &Tally,
) {
    let mut rng = crate_lock(rng);
    if rng.below(100) >= percent {
        return;
    }
    let action = match rng.below(6) {
        0 | 1 => FaultAction::Status {
            status: [400, 401, 404, 429, 500, 502, 503, 504][rng.below(8) as usize],
        },
        2 => FaultAction::Drop,
        3 => FaultAction::Malformed,
        4 => FaultAction::Oversize { bytes: 40 << 20 },
        _ => FaultAction::Delay,
    };
    let phase = if rng.below(2) == 0 {
        FaultPhase::Before
    } else {
        FaultPhase::After
    };
    let rule = FaultRule {
        operation: Some(op.as_str().to_owned()),
        latency_ms: rng.below(50),
        phase,
        times: Some(1),
        ..FaultRule::new(action)
    };
    if sandbox.add_fault(rule).is_ok() {
        tally.faults.fetch_add(1, Ordering::Relaxed);
    }
}
