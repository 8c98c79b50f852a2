//! Configuration reload: channels are added and removed without dropping
//! a call in flight, a refused reload changes nothing, the file is read
//! again, and `idgate serve` reloads on SIGHUP.

use std::time::Duration;

use idgate::{
    channels::ChannelSpec,
    cli::channels as cli,
    config::Config,
    domain::Operation,
    proto::v1::{self, RoutingMode},
};

use super::{VENDOR_A, VENDOR_B};
use crate::support::{
    gateway::*,
    net::gated_proxy,
    process::ServeProcess,
    wait::{Gate, eventually},
};

/// The reload configuration: the primary removed, the alternative
/// unchanged, and a third channel on the sandbox's core listener, on the
/// path pair of its alternative vendor.
fn reloaded_channels(gw: &TestGateway) -> Config {
    let sandbox = gw.sandbox();
    let alternative = sandbox
        .channels()
        .into_iter()
        .find(|c| c.name == "alternative")
        .expect("alternative");
    let mut config = test_config();
    config.channels = vec![
        ChannelSpec::new("alternative", alternative.base_url, 1),
        ChannelSpec {
            session_token_path: "/3d/session-token".into(),
            liveness_path: "/3d/liveness".into(),
            ..ChannelSpec::new("third", sandbox.channel_path_url("alternative"), 2)
        },
    ];
    config
}

#[tokio::test]
async fn a_reload_adds_and_removes_channels_without_dropping_a_call_in_flight() {
    let gw = TestGateway::start().await;
    let held = gw.create_journey().await;
    let later = gw.create_journey().await;

    // The primary's listener behind a gate: a session start sent there
    // stays in flight until the test opens it.
    let gate = Gate::closed();
    let proxy = gated_proxy(&gw.sandbox_channel_specs()[0].base_url, gate.clone()).await;
    gw.reload_channels(|channels| channels[0].base_url = proxy);
    let mut liveness = gw.liveness();
    let held_key = held.clone();
    let in_flight = tokio::spawn(async move {
        liveness
            .start_session3_d(v1::StartSession3DRequest {
                appkey: held_key,
                user_agent: "test".into(),
            })
            .await
    });
    gate.arrivals(1).await;

    gw.gateway
        .reload_from(&reloaded_channels(&gw))
        .expect("reload");
    let names: Vec<String> = gw
        .list_channels()
        .await
        .channels
        .into_iter()
        .map(|c| c.name)
        .collect();
    assert_eq!(names, ["alternative", "third"]);
    // Drain the alternative: new sessions go to the third channel.
    let drained = gw
        .admin()
        .await
        .drain_channel(v1::DrainChannelRequest {
            name: "alternative".into(),
        })
        .await
        .expect("drain")
        .into_inner()
        .channel
        .expect("channel");
    assert!(drained.drained);
    let s = gw.start_3d(&later).await.expect("session");
    assert_eq!((s.channel.as_str(), s.vendor.as_str()), ("third", VENDOR_B));
    assert!(!in_flight.is_finished(), "the held call is still in flight");
    assert_eq!(gw.sandbox_calls(Operation::SessionToken3D, "primary"), 0);

    // The call in flight on the removed channel completes.
    gate.open();
    let h = in_flight
        .await
        .expect("task")
        .expect("held session start")
        .into_inner();
    assert_eq!(
        (h.channel.as_str(), h.vendor.as_str()),
        ("primary", VENDOR_A)
    );
    assert_eq!(gw.sandbox_calls(Operation::SessionToken3D, "primary"), 1);
    // Its verification still reaches the channel that issued it.
    assert!(
        gw.verify_3d(&held, &h.session_token, "")
            .await
            .unwrap()
            .valid
    );
    assert_eq!(gw.sandbox_calls(Operation::Liveness3D, "primary"), 1);
    assert!(
        gw.verify_3d(&later, &s.session_token, "")
            .await
            .unwrap()
            .valid
    );
    assert_eq!(gw.sandbox_calls(Operation::Liveness3D, "alternative"), 1);
    gw.stop().await;
}

#[tokio::test]
async fn a_reload_refused_for_the_routing_mode_changes_nothing() {
    let gw = TestGateway::start().await;
    gw.admin()
        .await
        .set_routing_mode(v1::SetRoutingModeRequest {
            mode: RoutingMode::NamedChannel as i32,
            channel: "primary".into(),
            weights: Vec::new(),
            force: false,
        })
        .await
        .expect("set mode");
    assert!(gw.gateway.reload_from(&reloaded_channels(&gw)).is_err());
    let names: Vec<String> = gw
        .list_channels()
        .await
        .channels
        .into_iter()
        .map(|c| c.name)
        .collect();
    assert_eq!(names, ["primary", "alternative"]);
    gw.stop().await;
}

#[tokio::test]
async fn a_reload_rereads_the_configuration_file() {
    let dir = crate::support::temp::dir("config");
    let file = dir.path().join("idgate.toml");
    std::fs::write(&file, "").expect("write config");
    let gw = TestGateway::start_reloadable(&file).await;
    let alternative = gw.sandbox().channels()[1].base_url.clone();
    let primary = gw.sandbox().channels()[0].base_url.clone();
    std::fs::write(
        &file,
        format!(
            "[[channels]]\nname = \"backup\"\nbase_url = \"{alternative}\"\npriority = 0\n\
             [[channels]]\nname = \"primary\"\nbase_url = \"{primary}\"\npriority = 1\n"
        ),
    )
    .expect("write config");
    gw.gateway.reload().await.expect("reload");
    let appkey = gw.create_journey().await;
    let s = gw.start_3d(&appkey).await.expect("session");
    assert_eq!(
        (s.channel.as_str(), s.vendor.as_str()),
        ("backup", VENDOR_B)
    );

    // A file the gateway cannot use is refused and changes nothing.
    std::fs::write(
        &file,
        "[[channels]]\nname = \"x\"\nbase_url = \"http://a\"\n\
         [[channels]]\nname = \"x\"\nbase_url = \"http://b\"\n",
    )
    .expect("write config");
    assert!(gw.gateway.reload().await.is_err());
    let names: Vec<String> = gw
        .list_channels()
        .await
        .channels
        .into_iter()
        .map(|c| c.name)
        .collect();
    assert_eq!(names, ["backup", "primary"]);
    gw.stop().await;
}

#[tokio::test]
async fn idgate_serve_reloads_its_channels_on_sighup_and_obeys_the_channels_commands() {
    let dir = crate::support::temp::dir("serve");
    let config = dir.path().join("idgate.toml");
    let listen =
        "[listen]\ngrpc = \"127.0.0.1:0\"\nhttp = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n";
    std::fs::write(&config, listen).expect("write config");

    let serve = ServeProcess::start(&config);
    let base_url = serve.field("gateway upstream is the embedded sandbox", "base_url");
    let admin = serve
        .field("idgate listening", "admin")
        .trim_start_matches("Some(")
        .trim_end_matches(')')
        .to_owned();
    let token = admin_token();

    let text = cli::list(&admin, &token).await.expect("list");
    assert!(text.lines().any(|l| l.starts_with("alternative")), "{text}");
    let text = cli::drain(&admin, &token, "alternative")
        .await
        .expect("drain");
    assert!(text.starts_with("drained alternative"), "{text}");

    // SIGHUP: the file now names a channel on the sandbox's core listener.
    std::fs::write(
        &config,
        format!(
            "{listen}[[channels]]\nname = \"core-alt\"\n\
             base_url = \"{base_url}/service/captcha/channels/alternative\"\n\
             session_token_path = \"/3d/session-token\"\nliveness_path = \"/3d/liveness\"\n"
        ),
    )
    .expect("write config");
    serve.signal("HUP");
    eventually(
        "SIGHUP applies the new channel set",
        Duration::from_secs(10),
        async || {
            let text = cli::list(&admin, &token).await.expect("list");
            text.lines().any(|l| l.starts_with("core-alt"))
                && !text.lines().any(|l| l.starts_with("alternative"))
        },
    )
    .await;
    let text = cli::set_mode(&admin, &token, "channel:core-alt")
        .await
        .expect("mode");
    assert_eq!(text, "routing mode: channel:core-alt\n");

    // A file that does not load changes nothing; the gateway keeps serving.
    std::fs::write(&config, "garbage = [").expect("write config");
    serve.signal("HUP");
    let _ = serve.field("configuration reload refused", "error");
    let text = cli::list(&admin, &token).await.expect("list");
    assert!(
        text.starts_with("routing mode: channel:core-alt\n"),
        "{text}"
    );
    assert!(text.lines().any(|l| l.starts_with("core-alt")), "{text}");
    drop(serve);
}
