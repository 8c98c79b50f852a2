//! `/3d/session-token` and `/3d/liveness`, per channel.

use idgate::sandbox::samples::{
    HAPPY_PERSON, USER_AGENT_BLOCKED, USER_AGENT_INVALID, USER_AGENT_VALID,
};
use idgate::sandbox::{ChannelConfig, SandboxConfig};

use crate::support::{
    net::{RefusingPort, addr_of},
    sandbox::{config, standard, start, start_with},
};

#[tokio::test]
async fn each_channel_listener_names_its_own_vendor_and_address() {
    let env = start().await;
    let channels = env.sandbox.channels();
    assert_eq!(channels.len(), 2);
    assert_ne!(channels[0].base_url, channels[1].base_url);
    let defaults = SandboxConfig::default().channels;
    for (info, cfg) in channels.iter().zip(&defaults) {
        let appkey = env.appkey(HAPPY_PERSON).await;
        let r = env
            .session_token(&standard(&info.base_url), &appkey, None)
            .await;
        assert_eq!(r.status, 200);
        assert_eq!(r.str("vendor"), cfg.vendor);
        assert_eq!(info.vendor, cfg.vendor);
        assert_eq!(r.str("url"), cfg.vendor_url);
        assert_eq!(r.body["isContingency"], false);
        assert!(!r.str("token").is_empty());
    }
}

#[tokio::test]
async fn core_serves_the_first_channel_at_standard_paths_and_every_channel_by_name() {
    let env = start().await;
    let appkey = env.appkey(HAPPY_PERSON).await;
    let core = standard(&env.sandbox.base_url());
    let primary = env.session_token(&core, &appkey, None).await;
    assert_eq!(primary.str("vendor"), "sandbox-vendor-a");
    let alt = env
        .session_token(&env.sandbox.channel_path_url("alternative"), &appkey, None)
        .await;
    assert_eq!(alt.str("vendor"), "sandbox-vendor-b");
    let missing = env
        .session_token(&env.sandbox.channel_path_url("nope"), &appkey, None)
        .await;
    assert_eq!(missing.status, 404);
    // A primary session verifies on the primary's own listener too.
    let own = standard(&env.channel_base("primary"));
    let r = env.liveness_3d(&own, &appkey, &primary.str("token")).await;
    assert_eq!(r.status, 200);
}

#[tokio::test]
async fn liveness_3d_finishes_the_appkey_and_the_session() {
    let env = start().await;
    let appkey = env.appkey(HAPPY_PERSON).await;
    let root = standard(&env.sandbox.base_url());
    let first = env.session_token(&root, &appkey, None).await.str("token");
    let second = env.session_token(&root, &appkey, None).await.str("token");
    assert_eq!(
        env.sandbox.appkey_state(&appkey).map(|s| s.open_sessions),
        Some(2)
    );
    let r = env.liveness_3d(&root, &appkey, &first).await;
    assert_eq!(r.status, 200);
    assert_eq!(env.liveness_3d(&root, &appkey, &first).await.status, 401);
    assert_eq!(env.liveness_3d(&root, &appkey, &second).await.status, 401);
    assert_eq!(env.session_token(&root, &appkey, None).await.status, 401);
    assert_eq!(env.challenge(&appkey).await.status, 401);
    assert_eq!(
        env.sandbox.appkey_state(&appkey).map(|s| s.open_sessions),
        Some(0)
    );
}

#[tokio::test]
async fn session_token_must_match_the_appkey_and_the_channel_that_issued_it() {
    let env = start().await;
    let appkey = env.appkey(HAPPY_PERSON).await;
    let other = env.appkey(HAPPY_PERSON).await;
    let primary = standard(&env.channel_base("primary"));
    let alternative = standard(&env.channel_base("alternative"));
    let token = env
        .session_token(&primary, &appkey, None)
        .await
        .str("token");
    assert_eq!(
        env.liveness_3d(&alternative, &appkey, &token).await.status,
        401
    );
    assert_eq!(
        env.liveness_3d(
            &env.sandbox.channel_path_url("alternative"),
            &appkey,
            &token
        )
        .await
        .status,
        401
    );
    assert_eq!(env.liveness_3d(&primary, &other, &token).await.status, 401);
    assert_eq!(
        env.liveness_3d(&primary, &appkey, "unknown").await.status,
        401
    );
    // None of the refusals spent the session.
    assert_eq!(env.liveness_3d(&primary, &appkey, &token).await.status, 200);
}

#[tokio::test]
async fn user_agent_marker_chooses_the_3d_verdict() {
    let env = start().await;
    let root = standard(&env.sandbox.base_url());
    let cases = [
        (None, true, 200.0),
        (Some(USER_AGENT_VALID), true, 200.0),
        (Some(USER_AGENT_INVALID), false, 300.1),
        (Some(USER_AGENT_BLOCKED), false, 300.2),
    ];
    for (ua, valid, cod_id) in cases {
        let appkey = env.appkey(HAPPY_PERSON).await;
        let ua = ua.map(|m| format!("FaceSDK/9.1 (Android 14) {m}"));
        let token = env
            .session_token(&root, &appkey, ua.as_deref())
            .await
            .str("token");
        let r = env.liveness_3d(&root, &appkey, &token).await;
        assert_eq!(r.status, 200);
        assert_eq!(r.body["valid"], valid, "{ua:?}");
        assert_eq!(r.body["codID"].as_f64(), Some(cod_id));
        assert!(r.str("protocol").bytes().all(|b| b.is_ascii_digit()));
    }
}

#[tokio::test]
async fn contingency_flag_is_set_per_channel_by_config_handle_and_admin() {
    let mut cfg = config();
    cfg.channels[1].contingency = true;
    let env = start_with(cfg).await;
    let primary = standard(&env.channel_base("primary"));
    let alternative = standard(&env.channel_base("alternative"));
    let appkey = env.appkey(HAPPY_PERSON).await;
    assert_eq!(
        env.session_token(&alternative, &appkey, None).await.body["isContingency"],
        true
    );
    assert_eq!(
        env.session_token(&primary, &appkey, None).await.body["isContingency"],
        false
    );

    env.sandbox
        .set_contingency("primary", true)
        .expect("known channel");
    assert_eq!(
        env.session_token(&primary, &appkey, None).await.body["isContingency"],
        true
    );

    let url = format!("{}/channels/primary/contingency", env.sandbox.admin_url());
    let r = env
        .http
        .put(&url)
        .body(r#"{"contingency": false}"#)
        .send()
        .await
        .expect("sent");
    assert_eq!(r.status().as_u16(), 204);
    assert_eq!(
        env.session_token(&primary, &appkey, None).await.body["isContingency"],
        false
    );
}

#[tokio::test]
async fn a_stopped_channel_refuses_connections_while_others_serve() {
    let mut env = start().await;
    let primary = standard(&env.channel_base("primary"));
    let alternative = standard(&env.channel_base("alternative"));
    env.sandbox
        .stop_channel("primary")
        .await
        .expect("known channel");
    // Hold the freed port, so that no parallel test's server answers there.
    let _held = RefusingPort::take_over(addr_of(&env.channel_base("primary"))).await;
    let err = env
        .http
        .post(format!("{primary}/3d/session-token"))
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await
        .expect_err("connection refused");
    assert!(err.is_connect(), "{err:?}");
    let appkey = env.appkey(HAPPY_PERSON).await;
    assert_eq!(
        env.session_token(&alternative, &appkey, None).await.status,
        200
    );
}

#[tokio::test]
async fn channel_list_is_configurable() {
    let mut cfg = config();
    cfg.channels.push(ChannelConfig {
        name: "third".into(),
        vendor: "vendor-c".into(),
        vendor_url: "https://c.example/3d".into(),
        listen: "127.0.0.1:0".into(),
        contingency: false,
    });
    let env = start_with(cfg).await;
    assert_eq!(env.sandbox.channels().len(), 3);
    let appkey = env.appkey(HAPPY_PERSON).await;
    let r = env
        .session_token(&standard(&env.channel_base("third")), &appkey, None)
        .await;
    assert_eq!(r.str("vendor"), "vendor-c");
    assert_eq!(r.str("url"), "https://c.example/3d");
}

#[tokio::test]
async fn session_token_answers_401_for_an_unknown_appkey() {
    let env = start().await;
    let root = standard(&env.sandbox.base_url());
    assert_eq!(env.session_token(&root, "unknown", None).await.status, 401);
}

#[tokio::test]
async fn shutdown_closes_every_listener_even_after_a_channel_stopped() {
    let mut env = start().await;
    let core = env.core("/credencial");
    let result = env.result_url();
    env.sandbox
        .stop_channel("alternative")
        .await
        .expect("known channel");
    let crate::support::sandbox::Env { sandbox, http, .. } = env;
    sandbox.shutdown().await;
    // Hold the freed ports, so that no parallel test's server answers there.
    let _held = [
        RefusingPort::take_over(addr_of(&core)).await,
        RefusingPort::take_over(addr_of(&result)).await,
    ];
    for url in [core, result] {
        let err = http.post(&url).send().await.expect_err("closed");
        assert!(err.is_connect(), "{err:?}");
    }
}
