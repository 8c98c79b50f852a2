//! A vendor migration through the gateway: the weighted split of new 3D
//! sessions (`weighted:primary=90,alternative=10`) and the per-channel
//! figures `idgate channels compare` reads, on the embedded sandbox with
//! outcomes and latency chosen per channel.

use std::collections::HashMap;

use futures_util::{StreamExt as _, stream};
use idgate::{
    channels::{RoutingMode as Mode, WeightedSplit},
    cli::{
        channels::{self as cli, AdminTarget, CliError},
        compare,
    },
    domain::{JourneyRef, Operation},
    proto::v1::{self, RoutingMode},
    sandbox::{FaultAction, FaultRule, samples},
};
use serde_json::Value;
use tonic::Code;

use crate::support::{gateway::*, metrics};

/// Journeys created and started at once.
const CONCURRENCY: usize = 16;

impl TestGateway {
    /// Creates journey `i` for `p` (its own customer reference, so no two
    /// journeys are taken for one).
    async fn journey(&self, i: usize, p: samples::TestPerson) -> v1::CreateJourneyResponse {
        let mut request = person(p);
        request.customer_reference = format!("MIG{i:05}");
        self.create_journey_for(request).await
    }

    /// `StartSession3D` with `user_agent` (which picks the sandbox outcome).
    async fn start_3d_as(
        &self,
        appkey: &str,
        user_agent: &str,
    ) -> Result<v1::StartSession3DResponse, tonic::Status> {
        self.liveness()
            .start_session3_d(v1::StartSession3DRequest {
                appkey: appkey.into(),
                user_agent: user_agent.into(),
            })
            .await
            .map(tonic::Response::into_inner)
    }

    /// Starts a session for `n` new journeys; their appkeys and channels.
    async fn new_sessions(&self, n: usize) -> Vec<(String, String)> {
        stream::iter(0..n)
            .map(|i| async move {
                let appkey = self.journey(i, samples::HAPPY_PERSON).await.appkey;
                let s = self.start_3d(&appkey).await.expect("session");
                (appkey, s.channel)
            })
            .buffer_unordered(CONCURRENCY)
            .collect()
            .await
    }
}

fn count(sessions: &[(String, String)], channel: &str) -> usize {
    sessions.iter().filter(|(_, c)| c == channel).count()
}

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

/// What a test journey was set up to get.
struct Planned {
    on: usize,
    channel: String,
    valid: bool,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn channels_compare_sums_the_replicas_and_shows_the_pass_rates_and_latencies_set_up_per_channel()
 {
    let gw = TestGateway::start().await;
    let sibling = gw.sibling().await;
    let replicas = [&gw, &sibling];
    let split: &[(&str, u32)] = &[("primary", 50), ("alternative", 50)];
    for r in replicas {
        r.set_weighted(split).await.expect("weighted mode");
    }
    let Mode::Weighted(weighted) = "weighted:primary=50,alternative=50"
        .parse::<Mode>()
        .unwrap()
    else {
        unreachable!()
    };
    // The alternative answers slowly, and `invalid` for the CPFs of
    // REGISTRY_NEGATIVE; the primary answers `valid` for everyone.
    gw.sandbox()
        .add_fault(
            FaultRule::new(FaultAction::Delay)
                .on(Operation::Liveness3D)
                .channel("alternative")
                .latency_ms(300),
        )
        .expect("latency on the alternative");

    let planned: Vec<Planned> = stream::iter(0..60)
        .map(|i| run_journey(&replicas, &weighted, i))
        .buffer_unordered(8)
        .collect()
        .await;
    let tally = |channel: &str, valid: bool, on: Option<usize>| {
        planned
            .iter()
            .filter(|p| p.channel == channel && p.valid == valid && on.is_none_or(|o| o == p.on))
            .count() as u64
    };
    let alt_invalid = tally("alternative", false, None);
    let alt_valid = tally("alternative", true, None);
    assert!(alt_invalid > 0 && alt_valid > 0, "both outcomes set up");
    assert_eq!(tally("primary", false, None), 0);

    // Both replicas, summed by the CLI.
    let targets = || {
        replicas
            .iter()
            .map(|r| AdminTarget::from(&r.admin_addr()))
            .collect::<Vec<_>>()
    };
    let json = compare::compare(targets(), &admin_token(), 3_600, true)
        .await
        .expect("compare --json");
    let figures: Value = serde_json::from_str(&json).expect("JSON");
    assert_eq!(figures["gateways"], 2);
    let row = |name: &str| {
        figures["channels"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["channel"] == name)
            .unwrap_or_else(|| panic!("{name} in {figures}"))
            .clone()
    };
    let (alt, primary) = (row("alternative"), row("primary"));
    assert_eq!(alt["sessions"], alt_valid + alt_invalid);
    assert_eq!(alt["valid"], alt_valid);
    assert_eq!(alt["invalid"], alt_invalid);
    let want = alt_valid as f64 / (alt_valid + alt_invalid) as f64;
    assert!((alt["pass_rate"].as_f64().unwrap() - want).abs() < 1e-9);
    let [lo, hi] = [0, 1].map(|i| alt["pass_rate_ci95"][i].as_f64().unwrap());
    assert!(lo < want && want < hi, "{lo} < {want} < {hi}");
    assert_eq!(primary["pass_rate"], 1.0);
    assert_eq!(primary["sessions"], tally("primary", true, None));
    assert_eq!(alt["error_rate"], 0.0);
    assert_eq!(alt["contingency_rate"], 0.0);
    // The injected 300 ms is at least what the alternative's liveness shows.
    for q in ["liveness_p50_seconds", "liveness_p95_seconds"] {
        assert!(alt[q].as_f64().unwrap() >= 0.25, "{q}: {alt}");
    }
    assert!(alt["session_p50_seconds"].as_f64().is_some());

    let table = compare::compare(targets(), &admin_token(), 3_600, false)
        .await
        .expect("compare");
    assert!(table.contains("summed over 2 gateway(s)"), "{table}");
    let alt_row = table
        .lines()
        .find(|l| l.starts_with("alternative"))
        .unwrap();
    assert!(
        alt_row.contains(&format!("{:.1}%", want * 100.0)),
        "{alt_row}"
    );

    // One replica alone answers for the calls it sent (named twice, asked once).
    let one = compare::compare(
        vec![
            AdminTarget::from(&gw.admin_addr()),
            AdminTarget::from(&gw.admin_addr()),
        ],
        &admin_token(),
        3_600,
        true,
    )
    .await
    .unwrap();
    let one: Value = serde_json::from_str(&one).unwrap();
    assert_eq!(one["gateways"], 1);
    let alt_one = one["channels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["channel"] == "alternative")
        .unwrap()
        .clone();
    assert_eq!(alt_one["invalid"], tally("alternative", false, Some(0)));

    // The same verifications in /metrics, by channel and outcome.
    let metrics = gw.metrics_text().await;
    let counted = metrics::value(
        &metrics,
        "idgate_channel_verifications_total",
        &[("channel", "alternative"), ("outcome", "invalid")],
    );
    assert_eq!(
        counted,
        tally("alternative", false, Some(0)) as f64,
        "{metrics}"
    );
    // Each of them timed too, under the same labels.
    assert_eq!(
        metrics::value(
            &metrics,
            "idgate_channel_verification_duration_seconds_count",
            &[("channel", "alternative"), ("outcome", "invalid")],
        ),
        counted,
        "{metrics}"
    );
    sibling.stop().await;
    gw.stop().await;
}

/// Journey `i` on replica `i % 2`: its channel is the split's pick for its
/// journey reference; on the alternative, a REGISTRY_NEGATIVE person gets
/// `invalid`. Starts and verifies the session; says what was set up.
async fn run_journey(replicas: &[&TestGateway; 2], split: &WeightedSplit, i: usize) -> Planned {
    let on = i % 2;
    let gw = replicas[on];
    let negative = i % 3 == 0;
    let p = if negative {
        samples::REGISTRY_NEGATIVE[i % 5]
    } else {
        samples::REGISTRY_POSITIVE[i % 5]
    };
    let created = gw.journey(i, p).await;
    let journey = JourneyRef::parse(&created.journey_ref).expect("journey ref");
    let channel = split.pick(&journey, |_| true).expect("a pick").to_owned();
    let valid = !(negative && channel == "alternative");
    let user_agent = if valid {
        "test".to_owned()
    } else {
        samples::USER_AGENT_INVALID.to_owned()
    };
    let s = gw
        .start_3d_as(&created.appkey, &user_agent)
        .await
        .expect("session");
    assert_eq!(s.channel, channel, "the gateway picks what the split says");
    let verdict = gw
        .verify_3d(&created.appkey, &s.session_token, &s.channel)
        .await
        .expect("verdict");
    assert_eq!(verdict.valid, valid);
    Planned { on, channel, valid }
}

#[tokio::test]
async fn compare_refuses_a_window_beyond_the_retention_naming_the_field() {
    let gw = TestGateway::start_with(|c| c.routing.figures_retention_minutes = 60).await;
    let err = gw
        .admin()
        .await
        .get_channel_figures(v1::GetChannelFiguresRequest {
            window: Some(prost_types::Duration {
                seconds: 2 * 3_600,
                nanos: 0,
            }),
        })
        .await
        .unwrap_err();
    assert_error(&err, Code::InvalidArgument, "INVALID_REQUEST");
    assert_eq!(bad_fields(&err), ["window"]);
    let ok = gw
        .admin()
        .await
        .get_channel_figures(v1::GetChannelFiguresRequest { window: None })
        .await
        .expect("default window")
        .into_inner();
    assert_eq!(ok.window.map(|w| w.seconds), Some(3_600));
    let names: HashMap<String, u64> = ok
        .channels
        .iter()
        .map(|c| (c.name.clone(), c.sessions_started))
        .collect();
    assert_eq!(
        names,
        HashMap::from([("primary".into(), 0), ("alternative".into(), 0)])
    );
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

#[tokio::test]
async fn channel_figures_need_the_admin_token() {
    let gw = TestGateway::start().await;
    let mut client = v1::channel_admin_service_client::ChannelAdminServiceClient::connect(format!(
        "http://{}",
        gw.admin_addr()
    ))
    .await
    .expect("connect");
    let err = client
        .get_channel_figures(v1::GetChannelFiguresRequest { window: None })
        .await
        .unwrap_err();
    assert_error(&err, Code::Unauthenticated, "ADMIN_TOKEN_INVALID");
    let err = compare::compare(
        vec![AdminTarget::from(&gw.admin_addr())],
        &idgate::domain::AdminToken::new("not-the-admin-token").unwrap(),
        60,
        false,
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("ADMIN_TOKEN_INVALID"), "{err}");
    gw.stop().await;
}
