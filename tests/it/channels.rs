//! The admin service over a real tonic server on 127.0.0.1:0, and the CLI
//! helpers against it.

use std::{net::SocketAddr, sync::Arc};

use idgate::{
    api::admin_service,
    channels::{ChannelRouter, ChannelSpec, Liveness3DTransport, RoutingConfig, SessionGrant},
    cli::channels as cli,
    context::CallContext,
    domain::{AdminToken, Appkey, Operation, SessionToken},
    proto::v1::{
        self as pb, LivenessVerdict, channel_admin_service_client::ChannelAdminServiceClient,
    },
    upstream::{ChannelEndpoint, UpstreamError},
};
use tokio_stream::wrappers::TcpListenerStream;
use tonic::{Code, Request, transport::Channel};
use tonic_types::StatusExt;

use crate::support::net::bind_loopback;

const TOKEN: &str = "admin-test-token-0123456789abcdef";

/// Grants every session; the admin tests do not route calls.
struct Granting;

#[tonic::async_trait]
impl Liveness3DTransport for Granting {
    async fn session_token(
        &self,
        channel: &ChannelEndpoint,
        _appkey: &Appkey,
        _user_agent: &str,
        _ctx: &CallContext,
    ) -> Result<SessionGrant, UpstreamError> {
        Ok(SessionGrant {
            token: SessionToken::new("t"),
            vendor: format!("vendor-{}", channel.name()),
            vendor_url: channel.base_url().to_owned(),
            contingency: true,
        })
    }

    async fn liveness(
        &self,
        _channel: &ChannelEndpoint,
        _appkey: &Appkey,
        _token: &SessionToken,
        _ctx: &CallContext,
    ) -> Result<LivenessVerdict, UpstreamError> {
        Err(UpstreamError::Status {
            op: Operation::Liveness3D,
            status: 500,
        })
    }
}

async fn serve() -> (SocketAddr, Arc<ChannelRouter>) {
    let router = Arc::new(
        ChannelRouter::new(
            vec![
                ChannelSpec::new("primary", "http://primary.test", 0),
                ChannelSpec::new("alternative", "http://alternative.test", 1),
            ],
            &RoutingConfig::default(),
            Arc::new(Granting),
        )
        .unwrap(),
    );
    let (listener, addr) = bind_loopback().await;
    let service = admin_service(
        idgate::api::ChannelAdmin::new(router.clone()),
        &AdminToken::new(TOKEN).unwrap(),
    );
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(TcpListenerStream::new(listener)),
    );
    (addr, router)
}

async fn client(addr: SocketAddr) -> ChannelAdminServiceClient<Channel> {
    ChannelAdminServiceClient::connect(format!("http://{addr}"))
        .await
        .unwrap()
}

fn authed<T>(msg: T, header: &str) -> Request<T> {
    let mut r = Request::new(msg);
    r.metadata_mut()
        .insert("authorization", header.parse().unwrap());
    r
}

#[tokio::test]
async fn the_admin_service_refuses_calls_without_the_right_token() {
    let (addr, router) = serve().await;
    let mut c = client(addr).await;

    let err = c
        .list_channels(pb::ListChannelsRequest {})
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unauthenticated);
    assert_eq!(
        err.get_details_error_info().unwrap().reason,
        "ADMIN_TOKEN_INVALID"
    );

    let err = c
        .drain_channel(authed(
            pb::DrainChannelRequest {
                name: "primary".into(),
            },
            "Bearer wrong-token",
        ))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unauthenticated);
    assert!(
        !router.snapshot().channels[0].drained,
        "the refused drain did nothing"
    );

    let ok = c
        .list_channels(authed(
            pb::ListChannelsRequest {},
            &format!("Bearer {TOKEN}"),
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(ok.channels.len(), 2);
}

#[tokio::test]
async fn the_admin_service_lists_steers_and_drains_channels() {
    let (addr, router) = serve().await;
    let mut c = client(addr).await;
    let bearer = format!("Bearer {TOKEN}");

    router
        .start_session(&CallContext::unbounded(), &Appkey::new("k1"), "ua")
        .await
        .unwrap();
    let list = c
        .list_channels(authed(pb::ListChannelsRequest {}, &bearer))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(list.mode, pb::RoutingMode::Auto as i32);
    let p = &list.channels[0];
    assert_eq!((p.name.as_str(), p.priority), ("primary", 0));
    assert_eq!(p.circuit_state, pb::CircuitState::Closed as i32);
    assert_eq!((p.sessions_started, p.contingency_answers), (1, 1));
    assert!(p.last_contingency);
    assert_eq!(p.last_vendor, "vendor-primary");

    let set = c
        .set_routing_mode(authed(
            pb::SetRoutingModeRequest {
                mode: pb::RoutingMode::NamedChannel as i32,
                channel: "alternative".into(),
                weights: Vec::new(),
                force: false,
            },
            &bearer,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (set.mode, set.mode_channel.as_str()),
        (pb::RoutingMode::NamedChannel as i32, "alternative")
    );
    let started = router
        .start_session(&CallContext::unbounded(), &Appkey::new("k2"), "ua")
        .await
        .unwrap();
    assert_eq!(started.channel, "alternative");

    let drained = c
        .drain_channel(authed(
            pb::DrainChannelRequest {
                name: "alternative".into(),
            },
            &bearer,
        ))
        .await
        .unwrap()
        .into_inner();
    assert!(drained.channel.unwrap().drained);
    let undrained = c
        .undrain_channel(authed(
            pb::UndrainChannelRequest {
                name: "alternative".into(),
            },
            &bearer,
        ))
        .await
        .unwrap()
        .into_inner();
    assert!(!undrained.channel.unwrap().drained);
}

#[tokio::test]
async fn the_admin_service_rejects_unspecified_modes_and_unknown_channels() {
    let (addr, router) = serve().await;
    let mut c = client(addr).await;
    let bearer = format!("Bearer {TOKEN}");

    let err = c
        .set_routing_mode(authed(
            pb::SetRoutingModeRequest {
                mode: pb::RoutingMode::Unspecified as i32,
                channel: String::new(),
                weights: Vec::new(),
                force: false,
            },
            &bearer,
        ))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert_eq!(
        err.get_details_bad_request().unwrap().field_violations[0].field,
        "mode"
    );

    let err = c
        .set_routing_mode(authed(
            pb::SetRoutingModeRequest {
                mode: pb::RoutingMode::NamedChannel as i32,
                channel: "ghost".into(),
                weights: Vec::new(),
                force: false,
            },
            &bearer,
        ))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert_eq!(
        err.get_details_error_info().unwrap().reason,
        "CHANNEL_UNKNOWN"
    );
    assert_eq!(
        err.get_details_bad_request().unwrap().field_violations[0].field,
        "channel"
    );
    assert_eq!(router.mode(), idgate::channels::RoutingMode::Auto);

    for drain in [true, false] {
        let err = if drain {
            c.drain_channel(authed(
                pb::DrainChannelRequest {
                    name: "ghost".into(),
                },
                &bearer,
            ))
            .await
            .unwrap_err()
        } else {
            c.undrain_channel(authed(
                pb::UndrainChannelRequest {
                    name: "ghost".into(),
                },
                &bearer,
            ))
            .await
            .unwrap_err()
        };
        assert_eq!(err.code(), Code::InvalidArgument);
        assert_eq!(
            err.get_details_error_info().unwrap().reason,
            "CHANNEL_UNKNOWN"
        );
    }
}

#[tokio::test]
async fn the_cli_helpers_drive_the_admin_service() {
    let (addr, router) = serve().await;
    let token = AdminToken::new(TOKEN).unwrap();
    let addr = addr.to_string();

    let text = cli::drain(&addr, &token, "primary").await.unwrap();
    assert!(text.contains("drained primary"), "{text}");
    assert!(router.snapshot().channels[0].drained);

    let text = cli::set_mode(&addr, &token, "force_alternative")
        .await
        .unwrap();
    assert_eq!(text.trim(), "routing mode: force_alternative");

    let text = cli::list(&addr, &token).await.unwrap();
    assert!(text.contains("routing mode: force_alternative"), "{text}");
    let row = text.lines().find(|l| l.starts_with("primary")).unwrap();
    assert!(row.contains("yes") && row.contains("closed"), "{row}");

    cli::undrain(&addr, &token, "primary").await.unwrap();
    assert!(!router.snapshot().channels[0].drained);

    let err = cli::set_mode(&addr, &token, "channel:ghost")
        .await
        .unwrap_err();
    assert!(err.to_string().contains("CHANNEL_UNKNOWN"), "{err}");
    let err = cli::set_mode(&addr, &token, "sideways").await.unwrap_err();
    // The CLI quotes the operator's own input back, and names the forms.
    assert!(err.to_string().contains("`sideways`"), "{err}");
    assert!(err.to_string().contains("routing mode must be"), "{err}");

    let wrong = AdminToken::new("nope").unwrap();
    let err = cli::list(&addr, &wrong).await.unwrap_err();
    assert!(err.to_string().contains("ADMIN_TOKEN_INVALID"), "{err}");
}

#[test]
fn a_configuration_forcing_the_alternative_with_one_channel_is_refused_at_load() {
    let one_channel = "[routing]\nmode = \"force_alternative\"\n\
                       [[channels]]\nname = \"primary\"\nbase_url = \"http://primary.test\"\n";
    let err =
        idgate::config::Config::from_toml_and_env(one_channel, std::iter::empty()).unwrap_err();
    assert!(err.to_string().contains("force_alternative"), "{err}");

    let two_channels = format!(
        "{one_channel}[[channels]]\nname = \"alternative\"\nbase_url = \"http://alt.test\"\npriority = 1\n"
    );
    idgate::config::Config::from_toml_and_env(&two_channels, std::iter::empty()).unwrap();

    // The router built on derived channels applies the same rule.
    let routing = RoutingConfig {
        mode: idgate::channels::RoutingMode::ForceAlternative,
        ..RoutingConfig::default()
    };
    let err = ChannelRouter::new(
        vec![ChannelSpec::new("primary", "http://primary.test", 0)],
        &routing,
        Arc::new(Granting),
    )
    .unwrap_err();
    assert!(err.to_string().contains("force_alternative"), "{err}");
}
