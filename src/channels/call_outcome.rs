//! One call on a channel, as every view of the channel counts it: which
//! operation, how it ended, how long it took. A leaf: the recorder that
//! hands it out and each view that counts it ([`OutcomeSink`]) import it,
//! and it imports none of them.
//!
//! A record holds an operation, classes, a vendor name and a duration: no
//! appkey, token or person.

use std::time::Duration;

use super::transport::SessionGrant;
use crate::{
    domain::Operation,
    proto::v1::{LivenessCode, LivenessVerdict},
    upstream::UpstreamError,
};

/// The verdict of a verification that was answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// codID 200.0.
    Valid,
    /// codID 300.1.
    Invalid,
    /// codID 300.2.
    Blocked,
    /// A code no table lists.
    Other,
}

impl Verdict {
    /// The verdict of `v`'s code.
    pub fn of(v: &LivenessVerdict) -> Self {
        match LivenessCode::try_from(v.code) {
            Ok(LivenessCode::Valid) => Verdict::Valid,
            Ok(LivenessCode::Invalid) => Verdict::Invalid,
            Ok(LivenessCode::UserBlocked) => Verdict::Blocked,
            _ => Verdict::Other,
        }
    }

    /// The metric label: `valid`, `invalid`, `blocked` or `other`.
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Valid => "valid",
            Verdict::Invalid => "invalid",
            Verdict::Blocked => "blocked",
            Verdict::Other => "other",
        }
    }
}

/// How a call on a channel ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended<'a> {
    /// A session start granted by `vendor`, in contingency or not.
    Granted {
        /// The vendor named by the answer.
        vendor: &'a str,
        /// `isContingency`.
        contingency: bool,
    },
    /// A verification answered with a verdict.
    Verdict(Verdict),
    /// The call failed with an error of this class (`connect`, `timeout`,
    /// `http_5xx`, `deadline`, ...).
    Failed(&'static str),
    /// This gateway's own bulkhead refused it: nothing was sent.
    Refused,
    /// Not tried: the channel's circuit was open.
    CircuitOpen,
}

/// One call on a channel: the record every channel view is derived from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallOutcome<'a> {
    /// [`Operation::SessionToken3D`] or [`Operation::Liveness3D`].
    pub op: Operation,
    /// How it ended.
    pub ended: Ended<'a>,
    /// From sending to the answer (zero when nothing was sent).
    pub elapsed: Duration,
}

/// How an upstream error ends a call: refused by the bulkhead, else failed
/// by its class.
fn failed(e: &UpstreamError) -> Ended<'static> {
    match e {
        UpstreamError::Saturated { .. } => Ended::Refused,
        e => Ended::Failed(e.class()),
    }
}

impl<'a> CallOutcome<'a> {
    /// A session start that ended in `result` after `elapsed`.
    pub fn session(result: &'a Result<SessionGrant, UpstreamError>, elapsed: Duration) -> Self {
        let ended = match result {
            Ok(grant) => Ended::Granted {
                vendor: &grant.vendor,
                contingency: grant.contingency,
            },
            Err(e) => failed(e),
        };
        Self {
            op: Operation::SessionToken3D,
            ended,
            elapsed,
        }
    }

    /// A verification that ended in `result` after `elapsed`.
    pub fn verification(
        result: &Result<LivenessVerdict, UpstreamError>,
        elapsed: Duration,
    ) -> Self {
        let ended = match result {
            Ok(v) => Ended::Verdict(Verdict::of(v)),
            Err(e) => failed(e),
        };
        Self {
            op: Operation::Liveness3D,
            ended,
            elapsed,
        }
    }

    /// A session start that skipped a channel whose circuit was open.
    pub fn circuit_open() -> Self {
        Self {
            op: Operation::SessionToken3D,
            ended: Ended::CircuitOpen,
            elapsed: Duration::ZERO,
        }
    }

    /// True when the call reached the vendor's side (or was cut short
    /// there): what the vendor figures and the channel series count. A
    /// call this gateway refused or skipped is not the vendor's doing.
    pub fn was_sent(&self) -> bool {
        !matches!(self.ended, Ended::Refused | Ended::CircuitOpen)
    }

    /// The `outcome` label of a verification: the verdict or the error
    /// class.
    pub fn verification_label(&self) -> Option<&'static str> {
        match self.ended {
            Ended::Verdict(v) => Some(v.label()),
            Ended::Failed(class) => Some(class),
            _ => None,
        }
    }
}

/// A view that counts every call on a channel that reached the vendor's
/// side ([`CallOutcome::was_sent`]): the vendor figures, a rollout step's
/// counts, the channel series of `/metrics`. Producers publish, sinks
/// subscribe (as Envoy's stats sinks): the recorder holds the sinks it was
/// given and knows none of them.
pub trait OutcomeSink: Send + Sync + 'static {
    /// Counts one call on `channel`.
    fn record(&self, channel: &str, outcome: &CallOutcome<'_>);

    /// Counts a failed session start on `channel` that is being tried on
    /// another channel (a routing decision, not a call).
    fn failover(&self, _channel: &str) {}

    /// Counts a session start sent to `channel` past its open circuit,
    /// because every channel's circuit refused (panic routing).
    fn panic(&self, _channel: &str) {}
}
