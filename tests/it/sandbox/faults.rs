//! Fault injection and call counting, through the handle and the admin API.

use std::time::{Duration, Instant};

use idgate::domain::Operation;
use idgate::sandbox::samples::HAPPY_PERSON;
use idgate::sandbox::{FaultAction, FaultRule, SandboxConfig};
use serde_json::{Value, json};

use crate::support::sandbox::{config, into_resp, standard, start, start_with};

#[tokio::test]
async fn forced_status_answers_instead_of_the_operation() {
    let env = start().await;
    let appkey = env.appkey(HAPPY_PERSON).await;
    env.sandbox
        .add_fault(FaultRule::new(FaultAction::Status { status: 503 }).on(Operation::Challenge))
        .expect("valid rule");
    let r = env.challenge(&appkey).await;
    assert_eq!(r.status, 503);
    assert_eq!(r.body["message"], "injected fault");
    assert_eq!(
        env.sandbox.appkey_state(&appkey).map(|s| s.open_challenges),
        Some(0)
    );
    // Persistent until cleared.
    assert_eq!(env.challenge(&appkey).await.status, 503);
    env.sandbox.clear_faults();
    assert_eq!(env.challenge(&appkey).await.status, 200);
}

#[tokio::test]
async fn one_shot_fault_applies_to_the_next_n_calls_only() {
    let env = start().await;
    let appkey = env.appkey(HAPPY_PERSON).await;
    env.sandbox
        .add_fault(
            FaultRule::new(FaultAction::Status { status: 500 })
                .on(Operation::Challenge)
                .times(2),
        )
        .expect("valid rule");
    assert_eq!(env.challenge(&appkey).await.status, 500);
    assert_eq!(env.challenge(&appkey).await.status, 500);
    assert_eq!(env.challenge(&appkey).await.status, 200);
    assert!(env.sandbox.faults().is_empty());
}

#[tokio::test]
async fn dropped_connection_closes_the_socket_without_a_response() {
    let env = start().await;
    env.sandbox
        .add_fault(
            FaultRule::new(FaultAction::Drop)
                .on(Operation::Credential)
                .times(1),
        )
        .expect("valid rule");
    let err = env
        .http
        .post(env.core("/credencial"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body("user=sandbox&pass=sandbox")
        .send()
        .await
        .expect_err("no HTTP response");
    assert!(err.status().is_none(), "{err:?}");
    assert!(
        err.is_request() || err.is_connect() || err.is_body(),
        "{err:?}"
    );
    // The next call is served normally.
    env.credential().await;
}

#[tokio::test]
async fn malformed_body_fault_answers_200_with_invalid_json() {
    let env = start().await;
    let appkey = env.appkey(HAPPY_PERSON).await;
    env.sandbox
        .add_fault(FaultRule::new(FaultAction::Malformed).on(Operation::Result))
        .expect("valid rule");
    let r = env.result(&appkey).await;
    assert_eq!(r.status, 200);
    assert!(serde_json::from_slice::<Value>(&r.raw).is_err());
}

#[tokio::test]
async fn oversize_fault_answers_a_body_of_the_requested_size() {
    let env = start().await;
    env.sandbox
        .add_fault(
            FaultRule::new(FaultAction::Oversize {
                bytes: 3 * 1024 * 1024,
            })
            .on(Operation::Credential),
        )
        .expect("valid rule");
    let r = env
        .post_form(
            &env.core("/credencial"),
            &[("user", "sandbox"), ("pass", "sandbox")],
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.raw.len(), 3 * 1024 * 1024);
    assert!(r.body.is_object());
}

#[tokio::test]
async fn latency_fault_delays_the_answer() {
    let env = start().await;
    env.sandbox
        .add_fault(
            FaultRule::new(FaultAction::Delay)
                .on(Operation::Credential)
                .latency_ms(150),
        )
        .expect("valid rule");
    let started = Instant::now();
    env.credential().await;
    assert!(started.elapsed() >= Duration::from_millis(150));
}

#[tokio::test]
async fn fault_after_processing_changes_state_but_loses_the_answer() {
    let env = start().await;
    let appkey = env.appkey(HAPPY_PERSON).await;
    let root = standard(&env.sandbox.base_url());
    let token = env.session_token(&root, &appkey, None).await.str("token");
    env.sandbox
        .add_fault(
            FaultRule::new(FaultAction::Status { status: 502 })
                .on(Operation::Liveness3D)
                .after_processing()
                .times(1),
        )
        .expect("valid rule");
    assert_eq!(env.liveness_3d(&root, &appkey, &token).await.status, 502);
    // The proof was made: a retry is refused and the result exists.
    assert_eq!(env.liveness_3d(&root, &appkey, &token).await.status, 401);
    assert_eq!(env.result(&appkey).await.status, 200);
}

#[tokio::test]
async fn channel_fault_hits_only_that_channel_and_counters_prove_it() {
    let env = start().await;
    let appkey = env.appkey(HAPPY_PERSON).await;
    let primary = standard(&env.channel_base("primary"));
    let alternative = standard(&env.channel_base("alternative"));
    env.sandbox
        .add_fault(
            FaultRule::new(FaultAction::Status { status: 503 })
                .on(Operation::SessionToken3D)
                .channel("primary"),
        )
        .expect("valid rule");
    env.sandbox.reset_calls();
    assert_eq!(env.session_token(&primary, &appkey, None).await.status, 503);
    assert_eq!(
        env.session_token(&alternative, &appkey, None).await.status,
        200
    );
    // The core's standard paths are the primary channel.
    let core = standard(&env.sandbox.base_url());
    assert_eq!(env.session_token(&core, &appkey, None).await.status, 503);
    assert_eq!(
        env.sandbox
            .calls(Operation::SessionToken3D, Some("primary")),
        2
    );
    assert_eq!(
        env.sandbox
            .calls(Operation::SessionToken3D, Some("alternative")),
        1
    );
    assert_eq!(
        env.sandbox
            .calls(Operation::Liveness3D, Some("alternative")),
        0
    );
    assert_eq!(env.sandbox.calls(Operation::Credential, None), 0);
}

#[tokio::test]
async fn counters_count_every_operation_once_per_call() {
    let env = start().await;
    let appkey = env.appkey(HAPPY_PERSON).await;
    env.result(&appkey).await;
    assert_eq!(env.sandbox.calls(Operation::Credential, None), 1);
    assert_eq!(env.sandbox.calls(Operation::Appkey, None), 1);
    assert_eq!(env.sandbox.calls(Operation::Result, None), 1);
    let pdf = idgate::sandbox::samples::digital_licence_pdf();
    env.digital_licence(&appkey, &pdf).await;
    assert_eq!(env.sandbox.calls(Operation::DigitalLicence, None), 1);
    assert_eq!(env.sandbox.calls(Operation::DocumentImages, None), 0);
}

#[tokio::test]
async fn admin_endpoint_installs_lists_counts_and_clears_faults() {
    let env = start().await;
    let admin = env.sandbox.admin_url();
    let post = |body: Value| {
        let http = env.http.clone();
        let url = format!("{admin}/faults");
        async move {
            into_resp(
                http.post(url)
                    .body(body.to_string())
                    .send()
                    .await
                    .expect("sent"),
            )
            .await
        }
    };
    let created =
        post(json!({"operation": "challenge", "action": "status", "status": 418, "times": 1}))
            .await;
    assert_eq!(created.status, 201);
    assert!(created.body["id"].is_u64());
    assert_eq!(
        post(json!({"operation": "nope", "action": "drop"}))
            .await
            .status,
        400
    );
    assert_eq!(
        post(json!({"channel": "nope", "action": "drop"}))
            .await
            .status,
        400
    );
    assert_eq!(
        post(json!({"action": "status", "status": 42})).await.status,
        400
    );
    assert_eq!(post(json!({"action": "explode"})).await.status, 400);

    let list = into_resp(
        env.http
            .get(format!("{admin}/faults"))
            .send()
            .await
            .expect("sent"),
    )
    .await;
    assert_eq!(list.body.as_array().map(Vec::len), Some(1));
    assert_eq!(list.body[0]["remaining"], 1);

    let appkey = env.appkey(HAPPY_PERSON).await;
    assert_eq!(env.challenge(&appkey).await.status, 418);
    assert_eq!(env.challenge(&appkey).await.status, 200);

    let calls = into_resp(
        env.http
            .get(format!("{admin}/calls"))
            .send()
            .await
            .expect("sent"),
    )
    .await;
    let challenge = calls
        .body
        .as_array()
        .and_then(|a| a.iter().find(|c| c["operation"] == "challenge"))
        .expect("counted");
    assert_eq!(challenge["count"], 2);

    let id = post(json!({"action": "drop"})).await.body["id"]
        .as_u64()
        .expect("id");
    let removed = env
        .http
        .delete(format!("{admin}/faults/{id}"))
        .send()
        .await
        .expect("sent");
    assert_eq!(removed.status().as_u16(), 204);
    let again = env
        .http
        .delete(format!("{admin}/faults/{id}"))
        .send()
        .await
        .expect("sent");
    assert_eq!(again.status().as_u16(), 404);
    post(json!({"action": "drop"})).await;
    let cleared = env
        .http
        .delete(format!("{admin}/faults"))
        .send()
        .await
        .expect("sent");
    assert_eq!(cleared.status().as_u16(), 204);
    assert!(env.sandbox.faults().is_empty());
    let reset = env
        .http
        .delete(format!("{admin}/calls"))
        .send()
        .await
        .expect("sent");
    assert_eq!(reset.status().as_u16(), 204);
    assert!(env.sandbox.all_calls().is_empty());

    let state = into_resp(
        env.http
            .get(format!("{admin}/state"))
            .send()
            .await
            .expect("sent"),
    )
    .await;
    assert_eq!(state.body["store"]["appkeys"], 1);
}

#[tokio::test]
async fn faults_from_configuration_are_active_at_start() {
    let rule: FaultRule = serde_json::from_value(json!({
        "operation": "credential", "action": "status", "status": 500, "times": 1
    }))
    .expect("rule");
    let cfg = SandboxConfig {
        faults: vec![rule],
        ..config()
    };
    let env = start_with(cfg).await;
    let r = env
        .post_form(
            &env.core("/credencial"),
            &[("user", "sandbox"), ("pass", "sandbox")],
        )
        .await;
    assert_eq!(r.status, 500);
    env.credential().await;
}

#[tokio::test]
async fn handle_refuses_invalid_fault_rules() {
    let env = start().await;
    assert!(
        env.sandbox
            .add_fault(FaultRule::new(FaultAction::Drop).channel("nope"))
            .is_err()
    );
    assert!(
        env.sandbox
            .add_fault(FaultRule::new(FaultAction::Drop).times(0))
            .is_err()
    );
    assert!(env.sandbox.set_contingency("nope", true).is_err());
}
