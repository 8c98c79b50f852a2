//! Redis holds nothing personal in clear: no appkey, session token, CPF,
//! name, birth date or secret in its keys, values or stream entries, and
//! no photo at all, sealed or not (a watched journey's result, with
//! photos of a real capture's size, never reaches it); the spans of Redis
//! calls name the command only, never a key or value. A sealed value
//! moved by a Redis writer to another key does not open.

use std::{collections::BTreeMap, sync::Arc};

use idgate::sandbox::samples;

use super::EVENT_WAIT;
use crate::support::{
    fleet::{Fleet, PHOTO_BYTES, assert_complete, large_rg_images},
    gateway::{ADMIN_TOKEN, assert_error, by_ref, drain_within, happy_person, reason},
    wait::eventually,
    webhook::PASSWORD,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_holds_no_appkey_cpf_name_or_token_in_clear_and_no_photo() {
    let fleet = Fleet::start_with_photos(3, 30).await;
    let (a, b, c) = (&fleet.replicas[0], &fleet.replicas[1], &fleet.replicas[2]);

    let created = a.create_journey_for(happy_person()).await;
    let session = a.start_3d(&created.appkey).await.unwrap();
    let held_session = b.create_journey_for(happy_person()).await;
    let open_session = b.start_3d(&held_session.appkey).await.unwrap();
    c.verify_3d(&created.appkey, &session.session_token, "")
        .await
        .unwrap();
    a.submit_images(&created.appkey, &large_rg_images())
        .await
        .unwrap();
    fleet.finish_processing();
    let watcher = c.watch(by_ref(&created.journey_ref)).await;
    assert_eq!(
        a.post_notice("Completo", &created.appkey, Some("msg_scan"))
            .await
            .0,
        202
    );
    let (items, end) = drain_within(watcher, EVENT_WAIT).await;
    assert_complete(&items, &end);
    b.drain("alternative").await.unwrap();

    let person = samples::HAPPY_PERSON;
    let formatted_cpf = format!(
        "{}.{}.{}-{}",
        &person.cpf[..3],
        &person.cpf[3..6],
        &person.cpf[6..9],
        &person.cpf[9..]
    );
    let secrets = [
        ("appkey", created.appkey.as_str()),
        ("appkey", held_session.appkey.as_str()),
        ("session token", session.session_token.as_str()),
        ("session token", open_session.session_token.as_str()),
        ("CPF", person.cpf),
        ("CPF", formatted_cpf.as_str()),
        ("name", person.name),
        ("birth date", person.birth_date),
        ("webhook password", PASSWORD),
        ("admin token", ADMIN_TOKEN),
    ];
    let first_name = person.name.split(' ').next().unwrap();
    let check = |what: &str, text: &str| {
        for (kind, secret) in &secrets {
            assert!(!text.contains(secret), "{kind} in clear in {what}");
        }
        // As a word: a sealed value's Base64 may contain the letters of a
        // short first name by chance, which is not the name in clear.
        assert!(
            !text
                .split(|c: char| !c.is_alphanumeric())
                .any(|word| word.eq_ignore_ascii_case(first_name)),
            "name in clear in {what}"
        );
    };

    // C read the result on its turn (the proof went through A, so the
    // watch read at once) and announced it: a notice, not the result.
    eventually(
        "the result's announcement is in Redis",
        EVENT_WAIT,
        async || {
            let mut conn = fleet.redis.client().await;
            stream_fields(&mut conn, "idgate:{fleet}:events")
                .await
                .iter()
                .any(|v| String::from_utf8_lossy(v).contains("result-read"))
        },
    )
    .await;
    // `redis-cli --scan`, then every value by its type.
    let keys = fleet.redis.keys().await;
    let mut conn = fleet.redis.client().await;
    let kinds = [
        "journey:",
        "binding:",
        "dedupe:",
        "submitted:",
        "{fleet}:control:drained",
        "{fleet}:control:mode",
        "{fleet}:events",
    ];
    for kind in kinds {
        assert!(
            keys.iter()
                .any(|k| k.starts_with(&format!("idgate:{kind}"))),
            "a key of kind {kind} in {keys:?}"
        );
    }
    assert!(
        !keys.iter().any(|k| k.starts_with("idgate:result:")),
        "no result in Redis: {keys:?}"
    );
    for key in &keys {
        check("a key", key);
        let kind: String = redis::cmd("TYPE")
            .arg(key)
            .query_async(&mut conn)
            .await
            .unwrap();
        let values: Vec<Vec<u8>> = match kind.as_str() {
            "string" => vec![
                redis::cmd("GET")
                    .arg(key)
                    .query_async(&mut conn)
                    .await
                    .unwrap(),
            ],
            "set" => redis::cmd("SMEMBERS")
                .arg(key)
                .query_async(&mut conn)
                .await
                .unwrap(),
            "hash" => redis::cmd("HGETALL")
                .arg(key)
                .query_async(&mut conn)
                .await
                .unwrap(),
            "stream" => stream_fields(&mut conn, key).await,
            other => panic!("unexpected type {other} of {key}"),
        };
        for v in values {
            // A photo, sealed or not, is hundreds of KiB; nothing Redis
            // holds comes near.
            assert!(
                v.len() < PHOTO_BYTES / 16,
                "{key} holds a value of {} B",
                v.len()
            );
            check(key, &String::from_utf8_lossy(&v));
        }
    }
    // Every journey key holds a sealed value, not the appkey.
    let journey_key = format!("idgate:journey:{}", created.journey_ref);
    let sealed: String = redis::cmd("GET")
        .arg(&journey_key)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(sealed.len() > created.appkey.len());

    // The notice and the drain crossed the event stream (checked above).
    let events = stream_fields(&mut conn, "idgate:{fleet}:events").await;
    assert!(events.len() >= 2, "the notice and the drain: {events:?}");
    fleet.stop().await;
}

/// Every field and value of every entry of the stream `key`.
async fn stream_fields(conn: &mut redis::aio::MultiplexedConnection, key: &str) -> Vec<Vec<u8>> {
    let entries: redis::streams::StreamRangeReply = redis::cmd("XRANGE")
        .arg(key)
        .arg("-")
        .arg("+")
        .query_async(conn)
        .await
        .unwrap();
    entries
        .ids
        .into_iter()
        .flat_map(|e| e.map)
        .flat_map(|(field, value)| {
            let value = match value {
                redis::Value::BulkString(bytes) => bytes,
                other => format!("{other:?}").into_bytes(),
            };
            [field.into_bytes(), value]
        })
        .collect()
}

/// A Redis writer copies journey A's sealed directory entry over journey
/// B's: the value is bound to A's key, so a replica that resolves B
/// through the fleet refuses it (`JOURNEY_UNKNOWN`) instead of watching
/// A's appkey under B's reference.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sealed_value_copied_to_another_key_is_refused() {
    let fleet = Fleet::start(2, 30).await;
    let (a, b) = (&fleet.replicas[0], &fleet.replicas[1]);
    let journey_a = a.create_journey_for(happy_person()).await;
    let journey_b = a.create_journey_for(happy_person()).await;
    let key = |r: &str| format!("idgate:journey:{r}");
    let mut conn = fleet.redis.client().await;
    let sealed_a: String = redis::cmd("GET")
        .arg(key(&journey_a.journey_ref))
        .query_async(&mut conn)
        .await
        .unwrap();
    let () = redis::cmd("SET")
        .arg(key(&journey_b.journey_ref))
        .arg(&sealed_a)
        .query_async(&mut conn)
        .await
        .unwrap();

    let err = b
        .journeys()
        .watch_journey(by_ref(&journey_b.journey_ref))
        .await
        .expect_err("a moved sealed value does not resolve");
    assert_eq!(err.code(), tonic::Code::NotFound, "{err:?}");
    assert_eq!(reason(&err), "JOURNEY_UNKNOWN");
    // A's own entry, where it was sealed, still resolves on B.
    drop(b.watch(by_ref(&journey_a.journey_ref)).await);
    fleet.stop().await;
}

/// A Redis writer points the completed idempotency record of request B
/// at journey A, keeping B's request digest so that the record still
/// matches B. The record names a journey, not an appkey: B's replay reads
/// journey A's record, whose request key is A's, and is refused; it never
/// answers journey A.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idempotency_record_pointed_at_another_journey_replays_nothing() {
    let fleet = Fleet::start(2, 30).await;
    let (a, b) = (&fleet.replicas[0], &fleet.replicas[1]);
    let request = |reference: &str, id: &str| idgate::proto::v1::CreateJourneyRequest {
        customer_reference: reference.into(),
        request_id: id.into(),
        ..happy_person()
    };
    let id_b = "0f6d7c1e-92a4-4c35-9a0e-5b2f4e8d1c77";
    let journey_a = a
        .journeys()
        .create_journey(request("MOVEA", "7d1c3a52-6b0e-4f7b-8a51-2c9e0f4d3b11"))
        .await
        .unwrap()
        .into_inner();
    let journey_b = a
        .journeys()
        .create_journey(request("MOVEB", id_b))
        .await
        .unwrap()
        .into_inner();
    let mut conn = fleet.redis.client().await;
    let mut record_of = std::collections::HashMap::new();
    for key in fleet.redis.keys().await {
        if key.starts_with("idgate:idem:") {
            let value: String = redis::cmd("GET")
                .arg(&key)
                .query_async(&mut conn)
                .await
                .unwrap();
            let parts: Vec<String> = value.splitn(4, ':').map(str::to_owned).collect();
            assert_eq!(
                parts.len(),
                4,
                "d:<digest>:<journey>:<expiry>, no appkey: {value}"
            );
            record_of.insert(parts[2].clone(), (key, parts));
        }
    }
    let (_, a_parts) = &record_of[&journey_a.journey_ref];
    let (b_key, b_parts) = &record_of[&journey_b.journey_ref];
    // B's request digest; A's journey and expiry.
    let forged = format!("d:{}:{}:{}", b_parts[1], a_parts[2], a_parts[3]);
    let () = redis::cmd("SET")
        .arg(b_key)
        .arg(&forged)
        .query_async(&mut conn)
        .await
        .unwrap();

    let refused = b
        .journeys()
        .create_journey(request("MOVEB", id_b))
        .await
        .expect_err("a replay onto another request's journey is refused");
    assert_error(&refused, tonic::Code::PermissionDenied, "JOURNEY_NOT_OWNED");
    assert!(
        !format!("{refused:?}").contains(&journey_a.appkey),
        "{refused:?}"
    );
    fleet.stop().await;
}

/// Every span the process opens with a `db.system` field: name and fields.
type RecordedSpans = Arc<std::sync::Mutex<Vec<(String, BTreeMap<String, String>)>>>;

struct DbSpans(RecordedSpans);

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl tracing::field::Visit for Fields<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for DbSpans {
    /// Only the Redis spans are enabled: the rest of the binary's tests
    /// run as without a subscriber.
    fn register_callsite(
        &self,
        metadata: &'static tracing::Metadata<'static>,
    ) -> tracing::subscriber::Interest {
        if metadata.is_span() && metadata.fields().field("db.system").is_some() {
            tracing::subscriber::Interest::always()
        } else {
            tracing::subscriber::Interest::never()
        }
    }

    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        _: &tracing::span::Id,
        _: tracing_subscriber::layer::Context<'_, S>,
    ) {
        if attrs.metadata().fields().field("db.system").is_none() {
            return;
        }
        let mut fields = BTreeMap::new();
        attrs.record(&mut Fields(&mut fields));
        self.0
            .lock()
            .unwrap()
            .push((attrs.metadata().name().to_owned(), fields));
    }
}

/// Records the Redis spans made on this thread (the test runs on a
/// current-thread runtime, so every replica's span is made here) until the
/// guard drops. The test binary's global dispatcher keeps every callsite
/// asking the current thread's subscriber.
fn record_db_spans() -> (RecordedSpans, tracing::subscriber::DefaultGuard) {
    use tracing_subscriber::layer::SubscriberExt as _;
    crate::support::telemetry::keep_callsites_asking();
    let spans = RecordedSpans::default();
    let guard = tracing::subscriber::set_default(
        tracing_subscriber::registry().with(DbSpans(spans.clone())),
    );
    tracing::callsite::rebuild_interest_cache();
    (spans, guard)
}

#[tokio::test]
async fn redis_calls_are_client_spans_named_by_command_without_keys_or_values() {
    let (spans, _recording) = record_db_spans();
    let fleet = Fleet::start(2, 30).await;
    let (a, b) = (&fleet.replicas[0], &fleet.replicas[1]);
    let created = a.create_journey_for(happy_person()).await;
    let s = a.start_3d(&created.appkey).await.unwrap();
    b.verify_3d(&created.appkey, &s.session_token, "")
        .await
        .unwrap();
    let port = fleet.redis.port().to_string();
    let ours: Vec<_> = spans
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, f)| f.get("server.port") == Some(&port))
        .cloned()
        .collect();
    let commands: Vec<&str> = ours
        .iter()
        .map(|(_, f)| f["db.operation.name"].as_str())
        .collect();
    assert!(
        commands.contains(&"SET") && commands.contains(&"GET"),
        "{commands:?}"
    );
    for (name, fields) in &ours {
        assert_eq!(name, "redis");
        assert_eq!(fields["db.system"], "redis");
        assert_eq!(fields["otel.kind"], "client");
        assert_eq!(fields["otel.name"], fields["db.operation.name"]);
        let text = format!("{fields:?}");
        for secret in [
            created.appkey.as_str(),
            created.journey_ref.as_str(),
            "idgate:",
        ] {
            assert!(!text.contains(secret), "{secret} in a Redis span: {text}");
        }
    }
    fleet.stop().await;
}
