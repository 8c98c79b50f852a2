//! Two replicas on one `redis-server`: each counts the calls it served
//! under the caller's name, and the report through either replica is the
//! fleet's, equal to the replicas' metrics summed.

use idgate::{
    cli::{channels::AdminTarget, usage},
    proto::v1,
};
use serde_json::Value;
use tonic::Code;

use super::{around_today, assert_nothing_personal, callers_on, from_metrics, from_report};
use crate::support::{
    fleet::Fleet,
    gateway::{TestGateway, admin_token, assert_error, happy_person},
    jwt::{TestKey, bearer, callers, jwks_file, jwt_auth},
    wait::{EVENT_WAIT, eventually},
};

/// The report through `replica`, as `idgate usage --json` prints it.
async fn report_through(replica: &TestGateway) -> Value {
    let (from, to) = around_today();
    let query = usage::UsageQuery {
        from,
        to,
        caller: None,
    };
    let json = usage::usage(
        AdminTarget::from(&replica.admin_addr()),
        &admin_token(),
        &query,
        true,
    )
    .await
    .expect("idgate usage --json");
    serde_json::from_str(&json).expect("JSON")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_report_through_either_replica_counts_the_fleets_calls_as_the_metrics_summed_do() {
    let key = TestKey::es256("usage-fleet");
    let jwks = jwks_file(&[&key]);
    let mut fleet = Fleet::start(0, 30).await;
    fleet
        .add_replicas_with(2, |c| {
            c.auth = Some(jwt_auth(Some(jwks.clone()), None));
            c.callers = callers(&callers_on(&c.operator_profiles()));
        })
        .await;
    let (onboarding, kyc) = (key.token("svc-onboarding"), key.token("svc-kyc"));
    let (a, b) = (&fleet.replicas[0], &fleet.replicas[1]);
    let create = async |on: &TestGateway, token: &str| {
        on.journeys()
            .create_journey(bearer(token, happy_person()))
            .await
            .expect("create")
            .into_inner()
    };
    let mut created = Vec::new();
    for _ in 0..3 {
        created.push(create(a, &onboarding).await);
    }
    for _ in 0..2 {
        created.push(create(b, &kyc).await);
    }
    // A journey created on one replica, its 3D session on the other.
    let session = |token: &str, appkey: &str| {
        bearer(
            token,
            v1::StartSession3DRequest {
                appkey: appkey.to_owned(),
                user_agent: "usage-test".into(),
            },
        )
    };
    b.liveness()
        .start_session3_d(session(&onboarding, &created[0].appkey))
        .await
        .expect("3D session");
    let refused = a
        .liveness()
        .start_session3_d(session(&kyc, &created[3].appkey))
        .await
        .expect_err("kyc may not");
    assert_error(&refused, Code::PermissionDenied, "OPERATION_NOT_ALLOWED");

    let texts = [a.metrics_text().await, b.metrics_text().await];
    let summed = [
        from_metrics(&texts, "onboarding"),
        from_metrics(&texts, "kyc"),
    ];
    assert_eq!(summed, [[3, 3, 1, 0], [2, 2, 0, 1]], "{texts:?}");
    // Each replica's own share of it.
    assert_eq!(from_metrics(&texts[..1], "onboarding"), [3, 3, 0, 0]);
    assert_eq!(from_metrics(&texts[1..], "kyc"), [2, 2, 0, 0]);

    // Each replica hands its counts to Redis within a second; then either
    // one reports the fleet's.
    for through in [a, b] {
        eventually("the fleet's counts in the report", EVENT_WAIT, async || {
            let report = report_through(through).await;
            report["fleet"] == true
                && [
                    from_report(&report, "onboarding"),
                    from_report(&report, "kyc"),
                ] == summed
        })
        .await;
    }
    let report = report_through(a).await;
    let tokens = [onboarding.as_str(), kyc.as_str()];
    assert_nothing_personal(&report.to_string(), &created, &tokens);
    for text in &texts {
        assert_nothing_personal(text, &created, &tokens);
    }
    fleet.stop().await;
}
