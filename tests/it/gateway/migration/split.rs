//! The weighted split of new sessions: its share per channel, a repeat on
//! the same channel, drained channels, weights changed at run time or set
//! in the configuration, and malformed weights refused changing nothing.

use idgate::{
    cli::channels::{self as cli, CliError},
    domain::Operation,
    proto::v1::{self, RoutingMode},
    sandbox::samples,
};
use tonic::Code;

use super::count;
use crate::support::gateway::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_90_10_split_sends_85_to_95_percent_of_2000_new_sessions_to_the_primary_and_a_repeat_to_the_same_channel()
 {
    let gw = TestGateway::start().await;
    let set = gw
        .set_weighted(&[("primary", 90), ("alternative", 10)])
        .await
        .expect("weighted mode");
    assert_eq!(set.mode(), RoutingMode::Weighted);
    assert_eq!(
        set.weights,
        weights(&[("primary", 90), ("alternative", 10)])
    );

    let sessions = gw.new_sessions(2_000).await;
    let primary = count(&sessions, "primary");
    assert!(
        (1_700..=1_900).contains(&primary),
        "{primary} of 2000 on the primary"
    );
    assert_eq!(primary + count(&sessions, "alternative"), 2_000);
    // Each session was asked of one channel only: no failover hid a miss.
    let asked = gw.sandbox_calls(Operation::SessionToken3D, "primary")
        + gw.sandbox_calls(Operation::SessionToken3D, "alternative");
    assert_eq!(asked, 2_000);

    // A repeated StartSession3D for an appkey lands where the first did.
    for (appkey, channel) in sessions.iter().take(100) {
        let again = gw.start_3d(appkey).await.expect("session again");
        assert_eq!(&again.channel, channel);
    }
    gw.stop().await;
}

#[tokio::test]
async fn a_drained_channel_gets_no_new_session_under_a_weighted_split() {
    let gw = TestGateway::start().await;
    gw.set_weighted(&[("primary", 50), ("alternative", 50)])
        .await
        .expect("weighted mode");
    gw.admin()
        .await
        .drain_channel(v1::DrainChannelRequest {
            name: "alternative".into(),
        })
        .await
        .expect("drain");
    let sessions = gw.new_sessions(100).await;
    assert_eq!(count(&sessions, "primary"), 100);
    assert_eq!(
        gw.sandbox_calls(Operation::SessionToken3D, "alternative"),
        0
    );

    gw.admin()
        .await
        .undrain_channel(v1::UndrainChannelRequest {
            name: "alternative".into(),
        })
        .await
        .expect("undrain");
    let sessions = gw.new_sessions(100).await;
    assert!(count(&sessions, "alternative") > 0, "its share is back");
    gw.stop().await;
}

#[tokio::test]
async fn weights_changed_at_run_time_steer_the_next_session_and_a_started_one_verifies_where_it_started()
 {
    let gw = TestGateway::start().await;
    let addr = gw.admin_addr();
    let token = admin_token();
    let text = cli::set_mode(&addr, &token, "weighted:primary=0,alternative=100")
        .await
        .expect("idgate channels mode");
    assert_eq!(text, "routing mode: weighted:primary=0,alternative=100\n");
    let listed = cli::list(&addr, &token).await.expect("list");
    assert!(
        listed.contains("routing mode: weighted:primary=0,alternative=100"),
        "{listed}"
    );
    let early = gw.journey(1, samples::HAPPY_PERSON).await.appkey;
    let started = gw.start_3d(&early).await.expect("session");
    assert_eq!(started.channel, "alternative");

    cli::set_mode(&addr, &token, "weighted:primary=100,alternative=0")
        .await
        .expect("new weights");
    assert_eq!(
        gw.list_channels().await.weights,
        weights(&[("primary", 100), ("alternative", 0)])
    );
    let sessions = gw.new_sessions(20).await;
    assert_eq!(count(&sessions, "primary"), 20);

    // The session started before the change verifies on its channel.
    let verdict = gw
        .verify_3d(&early, &started.session_token, "")
        .await
        .expect("verify");
    assert!(verdict.valid);
    assert_eq!(gw.sandbox_calls(Operation::Liveness3D, "alternative"), 1);
    gw.stop().await;
}

#[tokio::test]
async fn a_malformed_weighted_mode_is_invalid_argument_naming_the_field_and_changes_nothing() {
    let gw = TestGateway::start().await;
    let cases: [(Vec<v1::ChannelWeight>, &str, &str); 4] = [
        (
            weights(&[("primary", 9), ("ghost", 1)]),
            "CHANNEL_UNKNOWN",
            "weights[1].channel",
        ),
        (
            weights(&[("primary", 0), ("alternative", 0)]),
            "INVALID_REQUEST",
            "weights",
        ),
        (
            weights(&[("primary", 1), ("primary", 2)]),
            "INVALID_REQUEST",
            "weights[1].channel",
        ),
        (
            weights(&[("primary", 1), ("alternative", 2_000_000)]),
            "INVALID_REQUEST",
            "weights[1].weight",
        ),
    ];
    for (split, reason_, field) in cases {
        let err = gw
            .admin()
            .await
            .set_routing_mode(v1::SetRoutingModeRequest {
                mode: RoutingMode::Weighted as i32,
                channel: String::new(),
                weights: split.clone(),
                force: false,
            })
            .await
            .unwrap_err();
        assert_error(&err, Code::InvalidArgument, reason_);
        assert_eq!(bad_fields(&err), [field], "{split:?}");
    }
    let stray = gw
        .admin()
        .await
        .set_routing_mode(v1::SetRoutingModeRequest {
            mode: RoutingMode::Auto as i32,
            channel: String::new(),
            weights: weights(&[("primary", 1)]),
            force: false,
        })
        .await
        .unwrap_err();
    assert_eq!(bad_fields(&stray), ["weights"]);

    // The CLI refuses bad text before sending anything.
    for text in [
        "weighted:primary=-1",
        "weighted:primary=1,",
        "weighted:",
        "weighted:primary=99999999999",
    ] {
        let err = cli::set_mode(&gw.admin_addr(), &admin_token(), text)
            .await
            .unwrap_err();
        assert!(matches!(err, CliError::Mode { .. }), "{text}: {err}");
    }
    assert_eq!(gw.list_channels().await.mode(), RoutingMode::Auto);
    gw.stop().await;
}

#[tokio::test]
async fn a_weighted_mode_in_the_configuration_routes_from_the_first_session() {
    let gw = TestGateway::start_with(|c| {
        c.routing.mode = "weighted:primary=0,alternative=1".parse().unwrap();
    })
    .await;
    let listed = gw.list_channels().await;
    assert_eq!(listed.mode(), RoutingMode::Weighted);
    assert_eq!(
        listed.weights,
        weights(&[("primary", 0), ("alternative", 1)])
    );
    let sessions = gw.new_sessions(10).await;
    assert_eq!(count(&sessions, "alternative"), 10);
    gw.stop().await;
}
