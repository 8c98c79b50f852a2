//! The `[[callers]]` policy per RPC: operations and operator profiles
//! outside a caller's entry are refused before any work, and a reloaded
//! table and JWKS file apply to the next call.

use idgate::proto::v1;
use tonic::Code;
use tonic_types::StatusExt as _;

use super::{CALLERS, gateway_with, refusals};
use crate::support::{
    gateway::{assert_error, happy_person},
    jwt::{TestKey, bearer, callers, jwks_file, jwks_of, jwt_auth},
};

#[tokio::test]
async fn operations_and_profiles_outside_the_policy_are_refused_and_a_reload_applies() {
    let key = TestKey::es256("k");
    let keys_file = jwks_file(&[&key]);
    let auth = jwt_auth(Some(keys_file.clone()), None);
    let gw = gateway_with(auth.clone(), |_| {}).await;
    let onboarding = key.token("svc-onboarding");
    let reader = key.token("svc-reader");
    let elsewhere = key.token("svc-elsewhere");

    // The onboarding caller may create, on its profile named or by default.
    let appkey = gw
        .journeys()
        .create_journey(bearer(&onboarding, happy_person()))
        .await
        .expect("onboarding creates")
        .into_inner()
        .appkey;
    let named = v1::CreateJourneyRequest {
        operator_profile: "sandbox".into(),
        ..happy_person()
    };
    gw.journeys()
        .create_journey(bearer(&onboarding, named))
        .await
        .expect("on its profile by name");

    // The reader may read, nothing else: OPERATION_NOT_ALLOWED, named.
    let status = gw
        .journeys()
        .create_journey(bearer(&reader, happy_person()))
        .await
        .expect_err("reader may not create");
    assert_error(&status, Code::PermissionDenied, "OPERATION_NOT_ALLOWED");
    let info = status.get_details_error_info().expect("ErrorInfo");
    assert_eq!(
        info.metadata.get("operation").map(String::as_str),
        Some("create_journey")
    );
    let status = gw
        .liveness()
        .create_challenges(bearer(
            &reader,
            v1::CreateChallengesRequest {
                appkey: appkey.clone(),
            },
        ))
        .await
        .expect_err("reader may not run challenges");
    assert_error(&status, Code::PermissionDenied, "OPERATION_NOT_ALLOWED");
    let status = gw
        .journeys()
        .watch_journey(bearer(
            &reader,
            v1::WatchJourneyRequest {
                journey: Some(v1::watch_journey_request::Journey::Appkey(appkey.clone())),
            },
        ))
        .await
        .expect_err("reader may not watch");
    assert_error(&status, Code::PermissionDenied, "OPERATION_NOT_ALLOWED");

    // A caller with create_journey but no operator profile.
    let status = gw
        .journeys()
        .create_journey(bearer(&elsewhere, happy_person()))
        .await
        .expect_err("no profile granted");
    assert_error(&status, Code::PermissionDenied, "PROFILE_NOT_ALLOWED");
    assert!(
        !status.message().contains("sandbox"),
        "{}",
        status.message()
    );

    let metrics = gw.metrics_text().await;
    assert_eq!(
        refusals(&metrics, "OPERATION_NOT_ALLOWED", "create_journey"),
        1.0
    );
    assert_eq!(
        refusals(&metrics, "OPERATION_NOT_ALLOWED", "challenges_2d"),
        1.0
    );
    assert_eq!(refusals(&metrics, "OPERATION_NOT_ALLOWED", "watch"), 1.0);
    assert_eq!(
        refusals(&metrics, "PROFILE_NOT_ALLOWED", "operator_profile"),
        1.0
    );

    // SIGHUP: the reader is granted creation on the sandbox profile, the
    // onboarding caller is gone, and the issuer's key file has rotated.
    let mut config = idgate::config::Config {
        auth: Some(auth),
        ..Default::default()
    };
    config.callers = callers(&CALLERS.replace(
        "jwt_subject = \"svc-reader\"\n    operations = [\"read_result\"]",
        "jwt_subject = \"svc-reader\"\n    operator_profiles = [\"sandbox\"]\n    operations = [\"read_result\", \"create_journey\"]",
    ));
    config.callers.retain(|c| c.name != "onboarding");
    let rotated = TestKey::ed25519("k2");
    std::fs::write(&keys_file, jwks_of(&[&rotated])).expect("rotate the key file");
    gw.gateway.reload_from(&config).expect("reload");
    gw.journeys()
        .create_journey(bearer(&rotated.token("svc-reader"), happy_person()))
        .await
        .expect("reader creates after the reload, with the new key");
    let status = gw
        .journeys()
        .create_journey(bearer(&reader, happy_person()))
        .await
        .expect_err("the old key is gone");
    assert_error(&status, Code::Unauthenticated, "CALLER_UNAUTHENTICATED");
    let status = gw
        .journeys()
        .create_journey(bearer(&rotated.token("svc-onboarding"), happy_person()))
        .await
        .expect_err("onboarding removed");
    assert_error(&status, Code::PermissionDenied, "CALLER_UNKNOWN");
    gw.stop().await;
}
