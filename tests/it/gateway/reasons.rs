//! The guard of the error table: every [`Reason`] has an end-to-end test
//! that triggers it through a real gateway, so the next reason cannot be
//! added untested. The table names the test function; the guard reads the
//! sources of `tests/it` and checks that the function exists and that its
//! body names the reason's wire string. A reason with no such test yet is
//! listed in [`NOT_YET`], which the guard reports rather than hides.

use std::path::Path;

use idgate::error::Reason;

/// Reason -> the end-to-end test that triggers it (its function name).
const COVERED: &[(Reason, &str)] = &[
    (
        Reason::InvalidRequest,
        "a_request_id_that_is_not_a_uuid_is_refused_naming_the_field",
    ),
    (
        Reason::SessionUnknown,
        "a_verification_without_binding_or_channel_is_refused_as_session_unknown",
    ),
    (
        Reason::ChannelUnknown,
        "an_unknown_channel_name_is_invalid_argument_without_retry_info_on_every_call_naming_one",
    ),
    (
        Reason::ChannelMismatch,
        "journey_refs_and_3d_sessions_resolve_on_a_replica_other_than_the_creator",
    ),
    (
        Reason::NoChannelAvailable,
        "no_channel_available_is_unavailable_with_retry_info_when_every_channel_fails_or_is_drained",
    ),
    (
        Reason::OperatorProfileUnknown,
        "an_unknown_operator_profile_is_invalid_argument",
    ),
    (
        Reason::JourneyUnknown,
        "a_reference_this_gateway_did_not_issue_is_not_found",
    ),
    (
        Reason::AdminTokenInvalid,
        "the_admin_service_refuses_calls_without_the_right_token",
    ),
    (
        Reason::DeadlineExceeded,
        "the_callers_deadline_ends_the_stream_with_deadline_exceeded",
    ),
    (
        Reason::WatchLimitReached,
        "watch_streams_past_the_per_connection_cap_are_refused_while_other_connections_watch",
    ),
    (
        Reason::ResultNotSettled,
        "a_result_still_processing_past_the_settle_limit_after_the_notice_ends_the_watch_result_not_settled",
    ),
    (
        Reason::WatchLifetimeReached,
        "a_stream_that_reaches_its_lifetime_ends_unavailable_and_may_watch_again",
    ),
    (
        Reason::ConnectionAged,
        "a_watch_open_when_its_connection_ages_ends_connection_aged_and_a_rewatch_completes",
    ),
    (
        Reason::ShuttingDown,
        "shutting_down_ends_open_watch_streams",
    ),
    (
        Reason::ClusterUnavailable,
        "with_redis_down_no_journey_is_created_and_budgets_count_per_replica",
    ),
    (
        Reason::MalformedRequest,
        "undecodable_protobuf_is_invalid_argument_malformed_request_and_counted_so",
    ),
    (
        Reason::MessageTooLarge,
        "a_message_over_the_size_limit_is_resource_exhausted_message_too_large",
    ),
    (
        Reason::Overloaded,
        "past_max_in_flight_calls_are_refused_overloaded_while_the_admitted_ones_are_held",
    ),
    (
        Reason::RequestBodyTimeout,
        "a_stalled_grpc_request_body_is_answered_request_body_timeout_and_frees_its_slot",
    ),
    (
        Reason::OutcomeUnknown,
        "upstream_500_on_consuming_operations_is_outcome_unknown_and_sent_once",
    ),
    (Reason::DocumentUnusable, "upstream_400_is_invalid_argument"),
    (
        Reason::UpstreamRejectedRequest,
        "upstream_400_is_invalid_argument",
    ),
    (
        Reason::OperatorCredentialsRejected,
        "upstream_401_is_unauthenticated_with_the_reason_of_the_operation",
    ),
    (
        Reason::AppkeyExpiredOrLicenceRejected,
        "upstream_401_is_unauthenticated_with_the_reason_of_the_operation",
    ),
    (
        Reason::AppkeyExpired,
        "upstream_401_on_the_result_is_unauthenticated_appkey_expired",
    ),
    (
        Reason::UpstreamPermissionDenied,
        "upstream_403_is_permission_denied_without_retry_info_and_sent_once",
    ),
    (Reason::ResultNotAvailable, "upstream_404_is_not_found"),
    (
        Reason::UpstreamConflict,
        "upstream_409_is_aborted_conflict_without_retry_info_and_sent_once",
    ),
    (
        Reason::UpstreamRateLimited,
        "upstream_429_on_safe_operations_is_rate_limited_with_retry_info_and_a_retry_is_served",
    ),
    (
        Reason::UpstreamUnavailable,
        "upstream_502_503_504_are_unavailable_with_retry_info_on_safe_operations",
    ),
    (
        Reason::UpstreamInternal,
        "upstream_500_is_internal_on_safe_operations_and_not_retried",
    ),
    (
        Reason::UpstreamUnexpectedStatus,
        "an_upstream_status_outside_the_contract_is_internal_unexpected_status",
    ),
    (
        Reason::UpstreamTimeout,
        "an_upstream_slower_than_its_timeout_is_deadline_exceeded",
    ),
    (
        Reason::UpstreamMalformedResponse,
        "garbage_json_is_a_malformed_response_error",
    ),
    (
        Reason::UpstreamResponseTooLarge,
        "an_oversize_body_is_refused_past_the_configured_bound",
    ),
    (
        Reason::RequestIdReused,
        "a_reused_request_id_with_other_data_is_refused_naming_request_id",
    ),
    (
        Reason::ConcurrentCallFailed,
        "a_call_waiting_on_a_first_call_that_fails_gets_concurrent_call_failed_without_calling_appkey",
    ),
    (
        Reason::BudgetExceeded,
        "a_budget_of_n_appkeys_per_minute_lets_n_through_then_refuses_before_any_upstream_call",
    ),
    (
        Reason::CallerUnauthenticated,
        "an_unknown_kid_is_fetched_for_once_then_refused_and_a_key_added_later_is_picked_up",
    ),
    (
        Reason::CallerUnknown,
        "every_jwt_rule_is_enforced_and_no_token_reaches_logs_metrics_or_errors",
    ),
    (
        Reason::OperationNotAllowed,
        "operations_and_profiles_outside_the_policy_are_refused_and_a_reload_applies",
    ),
    (
        Reason::ProfileNotAllowed,
        "operations_and_profiles_outside_the_policy_are_refused_and_a_reload_applies",
    ),
    (
        Reason::JourneyNotOwned,
        "a_journey_is_refused_to_another_own_caller_and_served_to_its_owner",
    ),
    (
        Reason::CallerLimitReached,
        "a_caller_past_its_stream_cap_is_refused_and_others_are_not",
    ),
    (
        Reason::RolloutConflict,
        "a_second_rollout_is_refused_while_one_runs_and_an_abort_puts_the_incumbent_back",
    ),
    (
        Reason::ChannelNotConforming,
        "the_probe_marks_a_channel_whose_session_token_answers_the_wrong_shape_non_conforming_and_refuses_it_weight",
    ),
];

/// Reasons with no end-to-end test yet. `INTERNAL` is a fault inside the
/// gateway; no test drives one through a running gateway (the serving
/// tests only assert that none was counted).
const NOT_YET: &[Reason] = &[Reason::Internal];

/// Every `.rs` file under `dir`, read.
fn sources(dir: &Path, out: &mut Vec<(String, String)>) {
    for entry in std::fs::read_dir(dir).expect("read tests/it") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let text = std::fs::read_to_string(&path).expect("read a test source");
            out.push((path.display().to_string(), text));
        }
    }
}

/// The text of the top-level function `name` (to its closing `}` at the
/// start of a line), if some source defines it.
fn function_body<'a>(sources: &'a [(String, String)], name: &str) -> Option<&'a str> {
    let needle = format!("fn {name}(");
    sources.iter().find_map(|(_, text)| {
        let start = text.find(&needle)?;
        let rest = &text[start..];
        let end = rest.find("\n}\n").map_or(rest.len(), |e| e + 3);
        Some(&rest[..end])
    })
}

#[test]
fn every_reason_has_an_end_to_end_test_or_is_listed_as_not_yet() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it");
    let mut all = Vec::new();
    sources(&root, &mut all);

    let mut problems = Vec::new();
    for reason in Reason::ALL {
        let listed: Vec<&str> = COVERED
            .iter()
            .filter(|(r, _)| *r == reason)
            .map(|(_, t)| *t)
            .collect();
        let not_yet = NOT_YET.contains(&reason);
        match (listed.as_slice(), not_yet) {
            ([], false) => problems.push(format!("{}: no end-to-end test", reason.as_str())),
            ([_, ..], true) => problems.push(format!(
                "{}: listed as covered and as NOT_YET",
                reason.as_str()
            )),
            _ => {}
        }
        for test in listed {
            match function_body(&all, test) {
                None => problems.push(format!("{}: no fn {test} in tests/it", reason.as_str())),
                Some(body) if !body.contains(&format!("\"{}\"", reason.as_str())) => {
                    problems.push(format!("{}: fn {test} does not name it", reason.as_str()))
                }
                Some(_) => {}
            }
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
    if !NOT_YET.is_empty() {
        let names: Vec<&str> = NOT_YET.iter().map(|r| r.as_str()).collect();
        eprintln!("reasons still without an end-to-end test: {names:?}");
    }
}
