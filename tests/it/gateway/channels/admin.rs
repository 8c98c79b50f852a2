//! The operators' side: the admin service takes only the admin token and
//! only on its own listener, and the `idgate channels` commands list, set
//! the mode, drain and undrain, and report each error clearly without the
//! token.

use idgate::{
    cli::channels::{self as cli, CliError},
    proto::v1::{self, RoutingMode, channel_admin_service_client::ChannelAdminServiceClient},
};
use tonic::{Code, Request};

use super::VENDOR_A;
use crate::support::{gateway::*, net::RefusingPort};

#[tokio::test]
async fn the_admin_service_refuses_missing_or_wrong_tokens() {
    let gw = TestGateway::start().await;
    let mut client = ChannelAdminServiceClient::connect(format!("http://{}", gw.admin_addr()))
        .await
        .expect("connect");
    for header in [None, Some("Bearer not-the-token"), Some(ADMIN_TOKEN)] {
        let mut request = Request::new(v1::ListChannelsRequest {});
        if let Some(h) = header {
            request
                .metadata_mut()
                .insert("authorization", h.parse().unwrap());
        }
        let err = client.list_channels(request).await.unwrap_err();
        assert_error(&err, Code::Unauthenticated, "ADMIN_TOKEN_INVALID");
        assert!(!retryable(&err), "{header:?}: no RetryInfo");
        assert!(!err.message().contains(ADMIN_TOKEN));
    }
    // A refused SetRoutingMode changes nothing.
    let err = client
        .set_routing_mode(v1::SetRoutingModeRequest {
            mode: RoutingMode::ForceAlternative as i32,
            channel: String::new(),
            weights: Vec::new(),
            force: false,
        })
        .await
        .unwrap_err();
    assert_error(&err, Code::Unauthenticated, "ADMIN_TOKEN_INVALID");
    assert!(!retryable(&err));
    assert_eq!(gw.list_channels().await.mode(), RoutingMode::Auto);
    // So do a refused drain and undrain.
    let err = client
        .drain_channel(v1::DrainChannelRequest {
            name: "primary".into(),
        })
        .await
        .unwrap_err();
    assert_error(&err, Code::Unauthenticated, "ADMIN_TOKEN_INVALID");
    assert!(!retryable(&err));
    assert!(!gw.channel_status("primary").await.drained);
    gw.admin()
        .await
        .drain_channel(v1::DrainChannelRequest {
            name: "primary".into(),
        })
        .await
        .expect("drain with the token");
    let err = client
        .undrain_channel(v1::UndrainChannelRequest {
            name: "primary".into(),
        })
        .await
        .unwrap_err();
    assert_error(&err, Code::Unauthenticated, "ADMIN_TOKEN_INVALID");
    assert!(!retryable(&err));
    assert!(gw.channel_status("primary").await.drained);
    gw.stop().await;
}

#[tokio::test]
async fn the_admin_service_is_not_served_on_the_public_listener() {
    let gw = TestGateway::start().await;
    let mut client = ChannelAdminServiceClient::connect(gw.gateway.grpc_url())
        .await
        .expect("connect");
    let mut request = Request::new(v1::ListChannelsRequest {});
    request.metadata_mut().insert(
        "authorization",
        format!("Bearer {ADMIN_TOKEN}").parse().unwrap(),
    );
    let err = client.list_channels(request).await.unwrap_err();
    assert_eq!(err.code(), Code::Unimplemented, "{err:?}");
    gw.stop().await;
}

#[tokio::test]
async fn the_channels_commands_list_set_the_mode_drain_and_undrain() {
    let gw = TestGateway::start().await;
    let addr = gw.admin_addr();
    let token = admin_token();
    let appkey = gw.create_journey().await;

    let text = cli::list(&addr, &token).await.expect("list");
    assert!(text.starts_with("routing mode: auto\n"), "{text}");
    for name in ["primary", "alternative"] {
        assert!(text.lines().any(|l| l.starts_with(name)), "{name}: {text}");
    }

    let text = cli::set_mode(&addr, &token, "force_alternative")
        .await
        .expect("mode");
    assert_eq!(text, "routing mode: force_alternative\n");
    assert_eq!(gw.start_3d(&appkey).await.unwrap().channel, "alternative");
    let text = cli::set_mode(&addr, &token, "auto").await.expect("mode");
    assert_eq!(text, "routing mode: auto\n");

    let text = cli::drain(&addr, &token, "primary").await.expect("drain");
    assert!(text.starts_with("drained primary"), "{text}");
    assert!(gw.channel_status("primary").await.drained);
    assert_eq!(gw.start_3d(&appkey).await.unwrap().channel, "alternative");
    let text = cli::undrain(&addr, &token, "primary")
        .await
        .expect("undrain");
    assert!(text.starts_with("undrained primary"), "{text}");
    assert_eq!(gw.start_3d(&appkey).await.unwrap().channel, "primary");

    let text = cli::list(&addr, &token).await.expect("list");
    let row = text.lines().find(|l| l.starts_with("primary")).unwrap();
    assert!(row.contains(VENDOR_A) && row.contains(" no "), "{row}");
    gw.stop().await;
}

#[tokio::test]
async fn the_channels_commands_report_errors_clearly() {
    let gw = TestGateway::start().await;
    let addr = gw.admin_addr();
    let token = admin_token();

    let err = cli::set_mode(&addr, &token, "sometimes").await.unwrap_err();
    assert!(matches!(err, CliError::Mode { .. }), "{err:?}");
    // The CLI quotes the operator's own input back, and names the forms.
    assert!(err.to_string().contains("`sometimes`"), "{err}");
    assert!(err.to_string().contains("routing mode must be"), "{err}");

    let err = cli::drain(&addr, &token, "ghost").await.unwrap_err();
    assert!(
        matches!(&err, CliError::Refused { code: Code::InvalidArgument, reason: Some(r), .. } if r == "CHANNEL_UNKNOWN"),
        "{err:?}"
    );

    let wrong = idgate::domain::AdminToken::new("wrong-token-1234").unwrap();
    let err = cli::list(&addr, &wrong).await.unwrap_err();
    assert!(
        matches!(
            &err,
            CliError::Refused {
                code: Code::Unauthenticated,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(!err.to_string().contains("wrong-token-1234"), "{err}");
    assert!(!format!("{err:?}").contains("wrong-token-1234"), "{err:?}");

    // Nothing listens on the public listener's admin service: the error
    // says the call was not served there.
    let err = cli::list(&gw.gateway.grpc_addr().to_string(), &token)
        .await
        .unwrap_err();
    assert!(
        matches!(
            &err,
            CliError::Refused {
                code: Code::Unimplemented,
                ..
            }
        ),
        "{err:?}"
    );
    gw.stop().await;
    // Hold the freed port, so that no parallel test's server answers there.
    let _held = RefusingPort::take_over(addr.parse().expect("admin address")).await;

    // A stopped gateway: the address is named, the token is not.
    let err = cli::list(&addr, &token).await.unwrap_err();
    assert!(matches!(err, CliError::Connect { .. }), "{err:?}");
    assert!(err.to_string().contains(&addr), "{err}");
    assert!(!err.to_string().contains(ADMIN_TOKEN));
}

#[tokio::test]
async fn each_admin_call_leaves_one_audit_record_by_the_admin_with_its_outcome() {
    // At WARN: audit records are kept whatever the level.
    let (logs, _default) = crate::support::telemetry::quiet_telemetry();
    let gw = TestGateway::start().await;
    gw.list_channels().await;
    gw.set_mode(RoutingMode::ForcePrimary).await;
    let mut admin = gw.admin().await;
    admin
        .drain_channel(v1::DrainChannelRequest {
            name: "alternative".into(),
        })
        .await
        .expect("drain a configured channel");
    let err = admin
        .undrain_channel(v1::UndrainChannelRequest {
            name: "ghost".into(),
        })
        .await
        .expect_err("an unknown channel");
    assert_error(&err, Code::InvalidArgument, "CHANNEL_UNKNOWN");
    gw.stop().await;

    let text = logs.contents();
    let summary: Vec<[String; 4]> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["target"] == "idgate::audit")
        .map(|r| {
            ["caller", "operation", "channel", "outcome"]
                .map(|k| r[k].as_str().unwrap_or_default().to_owned())
        })
        .collect();
    let expected = [
        ["admin", "list_channels", "", "ok"],
        ["admin", "set_routing_mode", "", "ok"],
        ["admin", "drain_channel", "alternative", "ok"],
        // Not a configured channel: its name is not recorded.
        ["admin", "undrain_channel", "", "CHANNEL_UNKNOWN"],
    ]
    .map(|r| r.map(str::to_owned));
    assert_eq!(summary, expected, "{text}");
}
