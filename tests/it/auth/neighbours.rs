//! One caller cannot starve or take over another, over real sockets: a
//! hostile but configured caller ("mallory") beside a well-behaved one
//! ("alice"). Padded watches are refused at their length prefix and hold
//! no request bytes; a caller holding its share of request bytes is
//! refused naming its share while alice's calls are read; a caller at its
//! share of live journeys is refused before the vendor while alice still
//! creates; and a vendor that repeats an appkey leaves the journey to its
//! first creator, on one replica and across replicas sharing Redis.

use std::net::SocketAddr;

use bytes::Bytes;
use idgate::{
    domain::Operation,
    proto::v1,
    sandbox::{FaultAction, FaultRule},
};
use tonic::Code;

use super::owners::with_owners_text;
use crate::support::{
    fleet::Fleet,
    gateway::{TestGateway, assert_error, by_appkey, by_ref, happy_person, retryable},
    jwt::{TestKey, bearer, jwks_file, jwt_auth},
    metrics, raw_grpc,
    wait::{EVENT_WAIT, eventually},
};

const NEIGHBOURS: &str = r#"
    [[callers]]
    name = "mallory"
    jwt_subject = "svc-mallory"
    operator_profiles = ["sandbox", "default"]
    operations = ["create_journey", "documents", "read_result", "watch"]

    [[callers]]
    name = "alice"
    jwt_subject = "svc-alice"
    operator_profiles = ["sandbox", "default"]
    operations = ["create_journey", "documents", "read_result", "watch"]
"#;

struct Neighbours {
    gw: TestGateway,
    mallory: String,
    alice: String,
}

/// A gateway with [`NEIGHBOURS`] as its callers, `edit` applied.
async fn neighbours(edit: impl FnOnce(&mut idgate::config::Config)) -> Neighbours {
    let key = TestKey::es256("neighbours");
    let auth = jwt_auth(Some(jwks_file(&[&key])), None);
    let gw = TestGateway::start_with(|c| {
        with_owners_text(c, auth, NEIGHBOURS);
        edit(c);
    })
    .await;
    Neighbours {
        gw,
        mallory: key.token("svc-mallory"),
        alice: key.token("svc-alice"),
    }
}

impl Neighbours {
    async fn create(&self, token: &str) -> Result<v1::CreateJourneyResponse, tonic::Status> {
        self.gw
            .journeys()
            .create_journey(bearer(token, happy_person()))
            .await
            .map(tonic::Response::into_inner)
    }
}

/// A raw HTTP/2 request to `path` as `token`, on a connection of its own,
/// whose body is the test's to send (a tonic client never sends a length
/// prefix it does not honour).
async fn raw_call(
    addr: SocketAddr,
    token: &str,
    path: &str,
) -> (
    h2::client::ResponseFuture,
    h2::SendStream<Bytes>,
    tokio::task::JoinHandle<Result<(), h2::Error>>,
) {
    let (send, driver) = raw_grpc::connect(addr).await;
    let (response, body) = raw_grpc::call(send, addr, path, Some(token)).await;
    (response, body, driver)
}

/// A gRPC frame announcing `declared` bytes and carrying `bytes`.
fn frame(declared: usize, bytes: &[u8]) -> Bytes {
    raw_grpc::frame(u32::try_from(declared).expect("u32"), bytes)
}

const WATCH: &str = "/idgate.v1.JourneyService/WatchJourney";
const DOCUMENTS: &str = "/idgate.v1.DocumentService/SubmitDocumentImages";

#[tokio::test]
async fn padded_watches_are_refused_at_their_length_prefix_and_hold_nothing_from_alice() {
    let n = neighbours(|_| {}).await;
    let addr = n.gw.gateway.grpc_addr();
    // Two watches announcing 128 MiB each (an unknown field's padding):
    // the first bytes are enough to refuse them, naming the RPC's limit.
    for _ in 0..2 {
        let (response, mut body, _driver) = raw_call(addr, &n.mallory, WATCH).await;
        body.send_data(frame(128 << 20, &[0x0A; 1024]), false)
            .expect("the prefix and a first chunk");
        let status = raw_grpc::status(response).await;
        assert_error(&status, Code::ResourceExhausted, "MESSAGE_TOO_LARGE");
        assert!(status.message().contains("65536"), "{status:?}");
    }
    // Alice is served as if mallory were not there.
    let created = n.create(&n.alice).await.expect("alice creates");
    n.gw.journeys()
        .watch_journey(bearer(&n.alice, by_ref(&created.journey_ref)))
        .await
        .expect("alice watches her journey");
    let text = n.gw.metrics_text().await;
    assert_eq!(
        metrics::counted(&text, r#"idgate_rpc_shed_total{limit="message_bytes"}"#),
        2.0,
        "{text}"
    );
    n.gw.stop().await;
}

#[tokio::test]
async fn a_caller_holding_its_byte_share_is_refused_naming_it_while_alice_is_read() {
    const DOCUMENT: usize = 96 * 1024;
    let n = neighbours(|c| {
        c.limits.max_grpc_message_bytes = Some(DOCUMENT);
        c.serving.max_body_bytes_in_flight = 4 * DOCUMENT;
        // Mallory's share holds one document message, no more.
        c.callers[0].max_body_bytes = Some(DOCUMENT + 16 * 1024);
    })
    .await;
    let addr = n.gw.gateway.grpc_addr();
    // Mallory sends 80 KiB of a document and stalls: they stay charged.
    let (held, mut held_body, _held_driver) = raw_call(addr, &n.mallory, DOCUMENTS).await;
    held_body
        .send_data(frame(DOCUMENT - 1024, &vec![0x0A; 80 * 1024]), false)
        .expect("partial body");
    // A second document of hers does not fit her share: refused naming
    // the share, not the process's budget.
    // (Until the gateway has read the stalled bytes, a second one is read
    // whole and found malformed.)
    let mut refused = None;
    eventually("mallory's share is charged", EVENT_WAIT, async || {
        let (response, mut body, _driver) = raw_call(addr, &n.mallory, DOCUMENTS).await;
        let _ = body.send_data(frame(40 * 1024, &vec![0xFF; 40 * 1024]), true);
        let status = raw_grpc::status(response).await;
        let done = status.code() == Code::ResourceExhausted;
        refused = Some(status);
        done
    })
    .await;
    let refused = refused.expect("a refusal");
    assert_error(&refused, Code::ResourceExhausted, "CALLER_LIMIT_REACHED");
    assert!(retryable(&refused));
    let text = refused.message();
    assert!(
        text.contains("max_body_bytes") && text.contains(&(DOCUMENT + 16 * 1024).to_string()),
        "{text}"
    );
    assert!(!text.contains(&(4 * DOCUMENT).to_string()), "{text}");

    // Alice's document of the same size is read (and found malformed:
    // the bytes are not a request, but they passed the door).
    let (response, mut body, _driver) = raw_call(addr, &n.alice, DOCUMENTS).await;
    body.send_data(frame(40 * 1024, &vec![0xFF; 40 * 1024]), true)
        .expect("alice's body");
    assert_error(
        &raw_grpc::status(response).await,
        Code::InvalidArgument,
        "MALFORMED_REQUEST",
    );
    held_body.send_reset(h2::Reason::CANCEL);
    drop(held);
    n.gw.stop().await;
}

#[tokio::test]
async fn a_caller_at_its_share_of_live_journeys_is_refused_before_the_vendor_while_alice_creates() {
    // Four records for the process: two callers, two each by default.
    let n = neighbours(|c| c.journeys.max_entries = 4).await;
    for _ in 0..2 {
        n.create(&n.mallory).await.expect("within mallory's share");
    }
    let before = n.gw.calls(Operation::Appkey);
    let err = n.create(&n.mallory).await.expect_err("past her share");
    assert_error(&err, Code::ResourceExhausted, "CALLER_LIMIT_REACHED");
    assert!(err.message().contains("max_journeys"), "{err:?}");
    assert_eq!(n.gw.calls(Operation::Appkey), before, "no appkey bought");
    for _ in 0..2 {
        n.create(&n.alice)
            .await
            .expect("alice's share is hers whatever mallory did");
    }
    n.gw.stop().await;
}

#[tokio::test]
async fn a_vendor_repeating_an_appkey_leaves_the_journey_to_its_first_creator() {
    let n = neighbours(|_| {}).await;
    let created = n.create(&n.alice).await.expect("alice creates");
    n.gw.sandbox()
        .add_fault(
            FaultRule::new(FaultAction::RepeatAppkey)
                .on(Operation::Appkey)
                .times(1),
        )
        .expect("valid rule");
    let err = n
        .create(&n.mallory)
        .await
        .expect_err("the vendor repeated alice's appkey");
    assert_error(&err, Code::Internal, "APPKEY_REPEATED");
    assert!(!retryable(&err));
    let text = format!("{err:?}");
    assert!(!text.contains(&created.appkey), "{text}");

    // The journey is still alice's, by appkey and by reference.
    n.gw.journeys()
        .watch_journey(bearer(&n.alice, by_appkey(&created.appkey)))
        .await
        .expect("alice still owns her journey");
    n.gw.journeys()
        .watch_journey(bearer(&n.alice, by_ref(&created.journey_ref)))
        .await
        .expect("alice watches her journey");
    let refused =
        n.gw.journeys()
            .watch_journey(bearer(&n.mallory, by_ref(&created.journey_ref)))
            .await
            .expect_err("mallory has no right to it");
    assert_error(&refused, Code::PermissionDenied, "JOURNEY_NOT_OWNED");
    let text = n.gw.metrics_text().await;
    assert_eq!(
        metrics::counted(&text, "idgate_appkey_repeats_total"),
        1.0,
        "{text}"
    );
    n.gw.stop().await;
}

#[tokio::test]
async fn a_repeated_appkey_leaves_the_journey_to_its_first_creator_across_replicas_sharing_redis() {
    let key = TestKey::es256("neighbours-fleet");
    let auth = jwt_auth(Some(jwks_file(&[&key])), None);
    let mut fleet = Fleet::start(0, 1).await;
    fleet
        .add_replicas_with(2, |c| with_owners_text(c, auth.clone(), NEIGHBOURS))
        .await;
    let (alice, mallory) = (key.token("svc-alice"), key.token("svc-mallory"));
    let (one, other) = (&fleet.replicas[0], &fleet.replicas[1]);
    let created = one
        .journeys()
        .create_journey(bearer(&alice, happy_person()))
        .await
        .expect("alice creates on one replica")
        .into_inner();
    fleet
        .sandbox
        .add_fault(
            FaultRule::new(FaultAction::RepeatAppkey)
                .on(Operation::Appkey)
                .times(1),
        )
        .expect("valid rule");
    let err = other
        .journeys()
        .create_journey(bearer(&mallory, happy_person()))
        .await
        .expect_err("the vendor repeated alice's appkey on the other replica");
    assert_error(&err, Code::Internal, "APPKEY_REPEATED");
    for replica in [one, other] {
        replica
            .journeys()
            .watch_journey(bearer(&alice, by_ref(&created.journey_ref)))
            .await
            .expect("alice still owns her journey on every replica");
        let refused = replica
            .journeys()
            .watch_journey(bearer(&mallory, by_ref(&created.journey_ref)))
            .await
            .expect_err("mallory has no right to it");
        assert_error(&refused, Code::PermissionDenied, "JOURNEY_NOT_OWNED");
    }
    fleet.stop().await;
}
