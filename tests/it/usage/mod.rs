//! Usage by configured caller: each caller's journeys, billed vendor
//! calls and refusals counted under its name on `/metrics`, and the
//! charge-back report (`idgate usage`, `GetUsage`) giving the same
//! numbers, on one replica (the binary) and across a two-replica fleet
//! on a real `redis-server`; no journey reference, appkey, CPF, subject
//! or token in either.

mod fleet;
mod one_replica;

use idgate::{proto::v1, sandbox::samples};
use serde_json::Value;

use crate::support::{jwt::ISSUER, metrics};

/// Two callers: `onboarding` creates journeys and runs 3D sessions, `kyc`
/// only creates journeys. `PROFILES` stands for the profile list.
const CALLERS: &str = r#"
[[callers]]
name = "onboarding"
jwt_subject = "svc-onboarding"
operator_profiles = PROFILES
operations = ["create_journey", "session_3d", "verify_3d"]

[[callers]]
name = "kyc"
jwt_subject = "svc-kyc"
operator_profiles = PROFILES
operations = ["create_journey"]
"#;

/// [`CALLERS`] on `profiles`.
fn callers_on(profiles: &[&str]) -> String {
    CALLERS.replace("PROFILES", &format!("{profiles:?}"))
}

/// A caller's numbers as `/metrics` shows them (summed over `texts`, one
/// per replica): journeys, billed create_journey, billed
/// start_session_3d, calls refused OPERATION_NOT_ALLOWED.
fn from_metrics(texts: &[String], caller: &str) -> [u64; 4] {
    let sum = |name: &str, labels: &[(&str, &str)]| -> u64 {
        let mut with_caller = vec![("caller", caller)];
        with_caller.extend_from_slice(labels);
        texts
            .iter()
            .map(|t| metrics::sum(t, name, &with_caller) as u64)
            .sum()
    };
    [
        sum("idgate_caller_journeys_total", &[]),
        sum(
            "idgate_caller_billed_total",
            &[("operation", "create_journey")],
        ),
        sum(
            "idgate_caller_billed_total",
            &[("operation", "start_session_3d")],
        ),
        sum(
            "idgate_caller_calls_total",
            &[("outcome", "OPERATION_NOT_ALLOWED")],
        ),
    ]
}

/// The same numbers from the report's JSON (`idgate usage --json`), every
/// day summed.
fn from_report(report: &Value, caller: &str) -> [u64; 4] {
    let days: Vec<&Value> = report["days"]
        .as_array()
        .expect("days")
        .iter()
        .filter(|d| d["caller"] == caller)
        .collect();
    let sum = |f: &dyn Fn(&Value) -> &Value| -> u64 {
        days.iter().map(|d| f(d).as_u64().unwrap_or(0)).sum()
    };
    [
        sum(&|d| &d["journeys_created"]),
        sum(&|d| &d["billed_calls"]["create_journey"]),
        sum(&|d| &d["billed_calls"]["start_session_3d"]),
        sum(&|d| &d["refusals"]["OPERATION_NOT_ALLOWED"]),
    ]
}

/// Yesterday and tomorrow (UTC), so that a run across midnight still
/// counts every call.
fn around_today() -> (String, String) {
    let today = idgate::telemetry::usage::today();
    (
        idgate::usage::day_text(today - 1),
        idgate::usage::day_text(today + 1),
    )
}

/// Asserts `text` names none of the values a journey or a caller's
/// credentials carry, and no label of an unknown identity.
#[track_caller]
fn assert_nothing_personal(text: &str, journeys: &[v1::CreateJourneyResponse], tokens: &[&str]) {
    let person = samples::HAPPY_PERSON;
    for j in journeys {
        assert!(!text.contains(&j.appkey), "appkey in {text}");
        assert!(!text.contains(&j.journey_ref), "journey ref in {text}");
    }
    for token in tokens {
        assert!(!text.contains(token), "token in {text}");
    }
    for value in [
        person.cpf,
        person.name,
        "svc-onboarding",
        "svc-kyc",
        "svc-stranger",
        ISSUER,
    ] {
        assert!(!text.contains(value), "{value} in {text}");
    }
}
