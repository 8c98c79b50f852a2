//! Fault injection and call counting, per operation and per channel.
//!
//! A rule matches calls of one operation (or all), on one channel (or
//! all). It can add latency and replace the answer with a forced status, a
//! dropped connection, a malformed or an oversize body, either before the
//! operation runs (nothing happens upstream) or after it (the state has
//! changed but the caller never learns the outcome). Rules are persistent
//! or one-shot (`times`).
//!
//! A rule with `share_percent` matches only the calls of a fixed share of
//! persons: the CPF behind the call's appkey is hashed (SHA-256) onto 100
//! buckets, and the rule matches persons in the first `share_percent` of
//! them. The same person always falls in the same bucket, so a test that
//! asks "30% of persons answer invalid" gets the same persons every run;
//! a call with no appkey the sandbox knows matches no share rule.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::http::StatusCode;
use serde::{Deserialize, Serialize};

use super::error::SandboxError;
use super::liveness::LivenessOutcome;
use crate::domain::Operation;

/// Default size of an oversize body: 8 MiB.
pub const DEFAULT_OVERSIZE_BYTES: usize = 8 * 1024 * 1024;

/// One fault rule, as configured or posted to `/_sandbox/faults`.
///
/// JSON: `{"operation": "session_token_3d", "channel": "primary",
/// "action": "status", "status": 503, "latency_ms": 0, "phase": "before",
/// "times": 1}`; only `action` (and its own fields) is required.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct FaultRule {
    /// Operation name ([`Operation::as_str`]); absent = every operation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation: Option<String>,
    /// Channel name; absent = calls on any channel or on none. A rule with
    /// a channel only matches 3D calls made on that channel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
    /// What to answer instead.
    #[serde(flatten)]
    pub action: FaultAction,
    /// Added latency before anything else, in milliseconds.
    #[serde(default)]
    pub latency_ms: u64,
    /// Whether the operation runs before the fault answers.
    #[serde(default)]
    pub phase: FaultPhase,
    /// Matches the next `times` calls, then disappears; absent = persistent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub times: Option<u32>,
    /// Matches only the calls of this share of persons (1 to 100), by a
    /// hash of the CPF behind the appkey; absent = every call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share_percent: Option<u8>,
}

impl FaultRule {
    /// A persistent rule for every operation and channel.
    pub fn new(action: FaultAction) -> Self {
        Self {
            operation: None,
            channel: None,
            action,
            latency_ms: 0,
            phase: FaultPhase::Before,
            times: None,
            share_percent: None,
        }
    }

    /// Restricts the rule to `percent` of persons (see the module).
    pub fn share_percent(mut self, percent: u8) -> Self {
        self.share_percent = Some(percent);
        self
    }

    /// Restricts the rule to one operation.
    pub fn on(mut self, operation: Operation) -> Self {
        self.operation = Some(operation.as_str().to_owned());
        self
    }

    /// Restricts the rule to one 3D channel.
    pub fn channel(mut self, name: &str) -> Self {
        self.channel = Some(name.to_owned());
        self
    }

    /// Makes the rule one-shot for the next `n` calls.
    pub fn times(mut self, n: u32) -> Self {
        self.times = Some(n);
        self
    }

    /// Adds latency.
    pub fn latency_ms(mut self, ms: u64) -> Self {
        self.latency_ms = ms;
        self
    }

    /// Lets the operation run first, then answers with the fault.
    pub fn after_processing(mut self) -> Self {
        self.phase = FaultPhase::After;
        self
    }
}

/// The answer a fault gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum FaultAction {
    /// Only the latency; the operation answers normally.
    Delay,
    /// This HTTP status with `{"message": "injected fault"}`.
    Status {
        /// The status code (100..=599).
        status: u16,
    },
    /// The connection is closed without an HTTP response.
    Drop,
    /// 200 with a body that is not JSON.
    Malformed,
    /// 200 with a valid JSON body of `bytes` bytes.
    Oversize {
        /// Body size.
        #[serde(default = "default_oversize")]
        bytes: usize,
    },
    /// 200 with a liveness verdict of this outcome (`invalid` or
    /// `blocked`; `valid` too), whatever the session asked.
    Verdict {
        /// `valid`, `invalid` or `blocked`.
        outcome: VerdictOutcome,
    },
    /// 200 with JSON of the wrong shape: every field of the contract
    /// missing or of another type (`{"isContingency":"no","token":42}`).
    WrongShape,
    /// `/appkey` only: 200 with the appkey issued last, while it lives,
    /// as a vendor that deduplicates by CPF or `idExternoCliente` would
    /// (the contract says each call issues a new one). Other operations,
    /// or no live appkey: the normal answer.
    RepeatAppkey,
}

/// The verdict a [`FaultAction::Verdict`] answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum VerdictOutcome {
    /// codID 200.0.
    Valid,
    /// codID 300.1.
    Invalid,
    /// codID 300.2.
    Blocked,
}

impl VerdictOutcome {
    fn liveness(self) -> LivenessOutcome {
        match self {
            VerdictOutcome::Valid => LivenessOutcome::Valid,
            VerdictOutcome::Invalid => LivenessOutcome::Invalid,
            VerdictOutcome::Blocked => LivenessOutcome::Blocked,
        }
    }
}

/// The bucket (0 to 99) of a person: SHA-256 of the CPF onto 100 buckets.
pub fn share_bucket(cpf: &str) -> u8 {
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(cpf.as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u8::try_from(u64::from_be_bytes(first) % 100).unwrap_or(0)
}

fn default_oversize() -> usize {
    DEFAULT_OVERSIZE_BYTES
}

/// When a fault answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultPhase {
    /// Instead of the operation: nothing changes upstream.
    #[default]
    Before,
    /// After the operation ran: the state changed, the answer is lost.
    After,
}

/// An installed rule, as listed by the handle and the admin endpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ActiveFault {
    /// Id for removal.
    pub id: u64,
    /// The rule.
    #[serde(flatten)]
    pub rule: FaultRule,
    /// Calls left for a one-shot rule.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remaining: Option<u32>,
}

/// How many calls an operation received on a channel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CallCount {
    /// Operation name.
    pub operation: &'static str,
    /// Channel name, for 3D calls.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
    /// Calls received (faulted ones included).
    pub count: u64,
}

/// The fault rules and call counters shared by every listener.
#[derive(Debug, Default)]
pub(crate) struct Faults {
    rules: Mutex<Vec<ActiveFault>>,
    next_id: AtomicU64,
    calls: Mutex<HashMap<(Operation, Option<String>), u64>>,
}

/// Checks a rule against the known operations and channels.
pub(crate) fn validate(rule: &FaultRule, channels: &[String]) -> Result<(), SandboxError> {
    if let Some(op) = &rule.operation {
        if !Operation::ALL.iter().any(|o| o.as_str() == op) {
            return Err(SandboxError::InvalidFault("unknown operation"));
        }
    }
    if let Some(ch) = &rule.channel {
        if !channels.iter().any(|c| c == ch) {
            return Err(SandboxError::InvalidFault("unknown channel"));
        }
    }
    if let FaultAction::Status { status } = rule.action {
        if StatusCode::from_u16(status).is_err() || status < 100 {
            return Err(SandboxError::InvalidFault("status must be 100..=599"));
        }
    }
    if rule.times == Some(0) {
        return Err(SandboxError::InvalidFault("times must be at least 1"));
    }
    if rule.share_percent.is_some_and(|p| !(1..=100).contains(&p)) {
        return Err(SandboxError::InvalidFault("share_percent must be 1..=100"));
    }
    Ok(())
}

impl Faults {
    /// Installs a validated rule; returns its id.
    pub(crate) fn add(&self, rule: FaultRule) -> u64 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        let remaining = rule.times;
        lock(&self.rules).push(ActiveFault {
            id,
            rule,
            remaining,
        });
        id
    }

    /// Removes one rule; false when no rule has that id.
    pub(crate) fn remove(&self, id: u64) -> bool {
        let mut rules = lock(&self.rules);
        let before = rules.len();
        rules.retain(|r| r.id != id);
        rules.len() != before
    }

    /// Removes every rule.
    pub(crate) fn clear(&self) {
        lock(&self.rules).clear();
    }

    /// The installed rules.
    pub(crate) fn list(&self) -> Vec<ActiveFault> {
        lock(&self.rules).clone()
    }

    /// Counts a call and returns the first rule that matches it (spending
    /// one use of a one-shot rule). `person`: the CPF behind the call's
    /// appkey, for share rules.
    pub(crate) fn on_call(
        &self,
        op: Operation,
        channel: Option<&str>,
        person: Option<&str>,
    ) -> Option<FaultRule> {
        *lock(&self.calls)
            .entry((op, channel.map(str::to_owned)))
            .or_insert(0) += 1;
        let bucket = person.map(share_bucket);
        let mut rules = lock(&self.rules);
        let at = rules.iter().position(|r| {
            r.rule.operation.as_deref().is_none_or(|o| o == op.as_str())
                && r.rule.channel.as_deref().is_none_or(|c| Some(c) == channel)
                && r.rule
                    .share_percent
                    .is_none_or(|share| bucket.is_some_and(|b| b < share))
        })?;
        let rule = rules[at].rule.clone();
        if let Some(left) = rules[at].remaining.as_mut() {
            *left = left.saturating_sub(1);
            if *left == 0 {
                rules.remove(at);
            }
        }
        Some(rule)
    }

    /// Calls of `op` on `channel` (`None`: calls not made on a channel).
    pub(crate) fn calls(&self, op: Operation, channel: Option<&str>) -> u64 {
        lock(&self.calls)
            .get(&(op, channel.map(str::to_owned)))
            .copied()
            .unwrap_or(0)
    }

    /// Every non-zero counter, sorted for stable output.
    pub(crate) fn all_calls(&self) -> Vec<CallCount> {
        let mut out: Vec<CallCount> = lock(&self.calls)
            .iter()
            .map(|((op, ch), n)| CallCount {
                operation: op.as_str(),
                channel: ch.clone(),
                count: *n,
            })
            .collect();
        out.sort_by(|a, b| (a.operation, &a.channel).cmp(&(b.operation, &b.channel)));
        out
    }

    /// Sets every counter back to zero.
    pub(crate) fn reset_calls(&self) {
        lock(&self.calls).clear();
    }
}

pub(crate) use crate::sync::lock;

mod answer;

pub(crate) use answer::response;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_shot_rule_matches_exactly_n_calls_and_counts_all() {
        let faults = Faults::default();
        faults.add(
            FaultRule::new(FaultAction::Drop)
                .on(Operation::Result)
                .times(2),
        );
        assert!(faults.on_call(Operation::Result, None, None).is_some());
        assert!(faults.on_call(Operation::Challenge, None, None).is_none());
        assert!(faults.on_call(Operation::Result, None, None).is_some());
        assert!(faults.on_call(Operation::Result, None, None).is_none());
        assert_eq!(faults.calls(Operation::Result, None), 3);
        assert!(faults.list().is_empty());
    }

    #[test]
    fn channel_rule_matches_only_its_channel() {
        let faults = Faults::default();
        faults.add(FaultRule::new(FaultAction::Malformed).channel("primary"));
        assert!(
            faults
                .on_call(Operation::SessionToken3D, Some("alternative"), None)
                .is_none()
        );
        assert!(
            faults
                .on_call(Operation::SessionToken3D, None, None)
                .is_none()
        );
        assert!(
            faults
                .on_call(Operation::SessionToken3D, Some("primary"), None)
                .is_some()
        );
    }

    #[test]
    fn a_share_rule_matches_the_same_persons_every_time_and_no_unknown_caller() {
        let faults = Faults::default();
        faults.add(FaultRule::new(FaultAction::WrongShape).share_percent(30));
        let persons: Vec<String> = (0..1_000).map(|i| format!("{i:011}")).collect();
        let hit = |p: &String| {
            faults
                .on_call(Operation::Liveness3D, Some("a"), Some(p))
                .is_some()
        };
        let first: Vec<bool> = persons.iter().map(hit).collect();
        let again: Vec<bool> = persons.iter().map(hit).collect();
        assert_eq!(first, again, "the same persons every time");
        let share = first.iter().filter(|h| **h).count();
        assert!((250..=350).contains(&share), "{share} of 1000");
        assert!(
            faults
                .on_call(Operation::Liveness3D, Some("a"), None)
                .is_none()
        );
    }

    #[test]
    fn rule_json_round_trips() {
        let json = r#"{"operation":"captcha","action":"status","status":503,"times":1}"#;
        let rule: FaultRule = serde_json::from_str(json).expect("parses");
        assert_eq!(rule.action, FaultAction::Status { status: 503 });
        assert_eq!(rule.times, Some(1));
        let channels = vec!["primary".to_owned()];
        assert!(validate(&rule, &channels).is_ok());
        let bad: FaultRule =
            serde_json::from_str(r#"{"operation":"nope","action":"drop"}"#).expect("parses");
        assert!(validate(&bad, &channels).is_err());
    }
}
