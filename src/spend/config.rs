//! `[idempotency]` and `[[budgets]]`: how long `CreateJourney` results are
//! replayed for a `request_id`, and what each operator profile may spend.

use std::{collections::HashSet, fmt};

use serde::Deserialize;

use crate::config_source::ConfigError;

/// An operation the identity-verification service bills, as budgets name
/// it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BilledOperation {
    /// `CreateJourney`: one `/appkey`.
    CreateJourney,
    /// `StartSession3D`: one 3D session (`/3d/session-token`), whatever
    /// the channel.
    #[serde(rename = "start_session_3d")]
    StartSession3D,
    /// `SubmitDocumentImages` and `SubmitDigitalLicence`: one `/document`.
    SubmitDocuments,
}

impl BilledOperation {
    /// Every billed operation.
    pub const ALL: [BilledOperation; 3] = [
        BilledOperation::CreateJourney,
        BilledOperation::StartSession3D,
        BilledOperation::SubmitDocuments,
    ];

    /// The configuration name, also the `operation` metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            BilledOperation::CreateJourney => "create_journey",
            BilledOperation::StartSession3D => "start_session_3d",
            BilledOperation::SubmitDocuments => "submit_documents",
        }
    }
}

impl fmt::Display for BilledOperation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `[idempotency]`: the replay window of `CreateJourney.request_id`.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct IdempotencyConfig {
    /// How long a completed creation is replayed for its `request_id`
    /// (AIP-155 suggests at least a day).
    pub ttl_secs: u64,
    /// How long a first call may hold a `request_id` before others stop
    /// waiting for it (its replica may have died): longer than the
    /// slowest `CreateJourney` (credential exchange and `/appkey`, each
    /// within `[upstream] timeout_ms`).
    pub pending_ttl_secs: u64,
    /// Most records held in memory by one process (the oldest is forgotten
    /// first); in a fleet Redis holds them, with their TTL as the bound.
    pub max_entries: usize,
}

impl Default for IdempotencyConfig {
    fn default() -> Self {
        Self {
            ttl_secs: 86_400,
            pending_ttl_secs: 60,
            max_entries: 100_000,
        }
    }
}

impl IdempotencyConfig {
    /// Positive durations and bound.
    pub fn validate(&self) -> Result<(), ConfigError> {
        for (key, value) in [
            ("idempotency.ttl_secs", self.ttl_secs),
            ("idempotency.pending_ttl_secs", self.pending_ttl_secs),
            ("idempotency.max_entries", self.max_entries as u64),
        ] {
            if value == 0 {
                return Err(ConfigError::Invalid(format!("{key} must be at least 1")));
            }
        }
        Ok(())
    }
}

/// One `[[budgets]]` entry: what `operator` may spend on `operation`
/// (with `caller`: what that caller may spend of it).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BudgetConfig {
    /// The operator profile (`[[operators]] name`; `sandbox` on the
    /// embedded sandbox).
    pub operator: String,
    /// The billed operation.
    pub operation: BilledOperation,
    /// Calls let through per minute (absent: no minute limit).
    #[serde(default)]
    pub per_minute: Option<u64>,
    /// Calls let through per day (absent: no day limit).
    #[serde(default)]
    pub per_day: Option<u64>,
    /// A `[[callers]] name`: the limits apply to that caller's calls on
    /// the profile, besides the profile's own budget (absent: the
    /// profile's budget, all callers together).
    #[serde(default)]
    pub caller: Option<String>,
}

/// Checks `budgets` against the operator profiles the gateway will have
/// and the `[[callers]]` names.
pub fn validate_budgets<'a>(
    budgets: &[BudgetConfig],
    profiles: &[&str],
    callers: impl IntoIterator<Item = &'a str>,
) -> Result<(), ConfigError> {
    let invalid = |why: String| Err(ConfigError::Invalid(why));
    let callers: HashSet<&str> = callers.into_iter().collect();
    let mut seen = HashSet::new();
    for (i, b) in budgets.iter().enumerate() {
        let at = format!("budgets[{i}]");
        if b.caller.as_deref().is_some_and(|c| !callers.contains(c)) {
            return invalid(format!("{at}.caller names no [[callers]] entry"));
        }
        if !profiles.contains(&b.operator.as_str()) {
            return invalid(format!(
                "{at}.operator names operator profile `{}`, which is not configured (profiles: {})",
                b.operator,
                profiles.join(", ")
            ));
        }
        if b.per_minute.is_none() && b.per_day.is_none() {
            return invalid(format!("{at} needs per_minute, per_day or both"));
        }
        if b.per_minute == Some(0) || b.per_day == Some(0) {
            return invalid(format!(
                "{at}: a limit must be at least 1 (drop the key for no limit)"
            ));
        }
        if !seen.insert((b.operator.as_str(), b.operation, b.caller.as_deref())) {
            return invalid(format!(
                "{at} repeats the budget of `{}` for operator profile `{}`{}",
                b.operation,
                b.operator,
                if b.caller.is_some() {
                    " and its caller"
                } else {
                    ""
                }
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(operator: &str, per_minute: Option<u64>, per_day: Option<u64>) -> BudgetConfig {
        BudgetConfig {
            caller: None,
            operator: operator.into(),
            operation: BilledOperation::CreateJourney,
            per_minute,
            per_day,
        }
    }

    #[test]
    fn budgets_must_name_a_profile_a_positive_limit_and_be_unique() {
        let mine = BudgetConfig {
            caller: Some("onboarding".into()),
            ..budget("default", Some(2), None)
        };
        let ok = [budget("default", Some(10), None), mine];
        assert!(validate_budgets(&ok, &["default"], ["onboarding"]).is_ok());
        for (bad, words) in [
            (vec![budget("other", Some(1), None)], "not configured"),
            (vec![budget("default", None, None)], "per_minute, per_day"),
            (vec![budget("default", Some(0), Some(5))], "at least 1"),
            (
                vec![
                    budget("default", Some(1), None),
                    budget("default", None, Some(9)),
                ],
                "repeats",
            ),
            (
                vec![BudgetConfig {
                    caller: Some("stranger".into()),
                    ..budget("default", Some(1), None)
                }],
                "names no [[callers]] entry",
            ),
        ] {
            let err = validate_budgets(&bad, &["default"], ["onboarding"])
                .unwrap_err()
                .to_string();
            assert!(err.contains(words), "{err}");
        }
    }

    #[test]
    fn operations_parse_by_their_configuration_names() {
        #[derive(Deserialize)]
        struct T {
            budgets: Vec<BudgetConfig>,
        }
        let t: T = toml::from_str(
            "[[budgets]]\noperator = \"a\"\noperation = \"start_session_3d\"\nper_day = 3\n",
        )
        .unwrap();
        assert_eq!(t.budgets[0].operation, BilledOperation::StartSession3D);
        assert!(
            toml::from_str::<T>("[[budgets]]\noperator = \"a\"\noperation = \"x\"\nper_day = 3\n")
                .is_err()
        );
    }
}
