//! The guard of the error table: every [`Reason`] has an end-to-end test
//! that triggers it through a real gateway, so the next reason cannot be
//! added untested ([`Reason::ALL`] is generated from the enum). The table
//! names the test function; the guard parses the sources of `tests/it`
//! and checks that the function is a test that runs and asserts the
//! reason's wire string ([`guard`] says exactly what counts). A reason
//! with no such test yet is listed in [`NOT_YET`], which the guard reports
//! rather than hides.

mod spend;

use std::path::Path;

use idgate::error::Reason;

use self::spend::Sources;

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
        Reason::CallerRevoked,
        "a_reload_that_removes_a_caller_ends_her_open_watch_permission_denied_while_another_caller_s_goes_on",
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
        Reason::AppkeyRepeated,
        "a_vendor_repeating_an_appkey_leaves_the_journey_to_its_first_creator",
    ),
    (
        Reason::RolloutConflict,
        "a_second_rollout_is_refused_while_one_runs_and_an_abort_puts_the_incumbent_back",
    ),
    (
        Reason::ChannelNotConforming,
        "the_probe_marks_a_channel_whose_session_token_answers_the_wrong_shape_non_conforming_and_refuses_it_weight",
    ),
    (
        Reason::ProbeNotConfigured,
        "without_probe_persons_the_probe_names_the_setting_to_configure",
    ),
];

/// Reasons with no end-to-end test yet. `INTERNAL` is a fault inside the
/// gateway; no test drives one through a running gateway (the serving
/// tests only assert that none was counted).
const NOT_YET: &[Reason] = &[Reason::Internal];

/// What is wrong with the table for the reasons named `reasons` (wire
/// strings): a reason with no row and not in [`NOT_YET`], one in both, a
/// row that does not hold in `sources` (see [`guard`]).
fn problems(reasons: &[&str], sources: &Sources) -> Vec<String> {
    let mut problems = Vec::new();
    for &reason in reasons {
        let listed: Vec<&str> = COVERED
            .iter()
            .filter(|(r, _)| r.as_str() == reason)
            .map(|(_, t)| *t)
            .collect();
        let not_yet = NOT_YET.iter().any(|r| r.as_str() == reason);
        match (listed.as_slice(), not_yet) {
            ([], false) => problems.push(format!("{reason}: no end-to-end test")),
            ([_, ..], true) => problems.push(format!("{reason}: listed as covered and as NOT_YET")),
            _ => {}
        }
        problems.extend(listed.iter().filter_map(|test| sources.check(reason, test)));
    }
    problems
}

fn test_sources() -> Sources {
    Sources::read(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it"))
}

#[test]
fn every_reason_has_an_end_to_end_test_or_is_listed_as_not_yet() {
    let reasons: Vec<&str> = Reason::ALL.iter().map(|r| r.as_str()).collect();
    let problems = problems(&reasons, &test_sources());
    assert!(problems.is_empty(), "{problems:#?}");
    if !NOT_YET.is_empty() {
        let names: Vec<&str> = NOT_YET.iter().map(|r| r.as_str()).collect();
        eprintln!("reasons still without an end-to-end test: {names:?}");
    }
}

/// A variant added to `Reason` is in `Reason::ALL` (generated from the
/// enum), and the guard refuses it until it has a row.
#[test]
fn a_reason_without_a_row_fails_the_guard() {
    let mut reasons: Vec<&str> = Reason::ALL.iter().map(|r| r.as_str()).collect();
    reasons.push("A_NEW_REASON");
    assert_eq!(
        problems(&reasons, &test_sources()),
        ["A_NEW_REASON: no end-to-end test"]
    );
}

/// The ways a row used to hold without an assert: each is refused.
#[test]
fn a_row_holds_only_for_a_test_that_asserts_the_reason() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/gateway/example.rs");
    let mut sources =
        Sources::read(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/support"));
    sources.add(
        &file,
        r#"
        #[tokio::test]
        async fn asserted() { assert_eq!(reason(&s), "SOME_REASON"); }
        #[test]
        fn through_a_project_helper() { assert_error(&s, Code::NotFound, "SOME_REASON"); }
        #[test]
        fn through_a_local_helper() { let s = call(); refused(&s); }
        fn refused(s: &Status) { assert_eq!(reason(s), "SOME_REASON"); }
        #[test]
        fn commented_out() {
            // assert_eq!(reason(&s), "SOME_REASON");
        }
        #[test]
        fn only_named() { let counted = metric("SOME_REASON"); assert_eq!(counted, 1.0); }
        #[test]
        fn negated() { assert_ne!(reason(&s), "SOME_REASON"); assert!(!text.contains("SOME_REASON")); }
        #[tokio::test]
        #[ignore]
        async fn ignored() { assert_eq!(reason(&s), "SOME_REASON"); }
        async fn not_a_test() { assert_eq!(reason(&s), "SOME_REASON"); }
        #[test]
        fn two_levels_down() { outer(); }
        fn outer() { inner(); }
        fn inner() { assert_eq!(reason(&s), "SOME_REASON"); }
        "#,
    );
    let verdict = |test: &str| sources.check("SOME_REASON", test);
    for holds in [
        "asserted",
        "through_a_project_helper",
        "through_a_local_helper",
    ] {
        assert_eq!(verdict(holds), None, "{holds}");
    }
    for fails in [
        "commented_out",
        "only_named",
        "negated",
        "ignored",
        "not_a_test",
        "two_levels_down",
        "missing",
    ] {
        assert!(verdict(fails).is_some(), "{fails} holds");
    }
}
