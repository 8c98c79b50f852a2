//! What the receiver accepts as a request: oversize, malformed and unknown
//! bodies are refused with JSON errors (also when chunked) and wake
//! nothing, and only POST on the configured path is answered.

use std::sync::atomic::Ordering;

use idgate::events::{RejectReason, WebhookSettings};

use super::{CountingSource, basic, body, send, start, watch_settings, webhook};
use crate::support::webhook::{PASSWORD, USER, post_chunked, status_code};

#[tokio::test]
async fn oversize_malformed_and_unknown_bodies_are_refused_with_json_errors() {
    let gw = start(
        WebhookSettings {
            max_body_bytes: 256,
            ..webhook(basic(), None)
        },
        watch_settings(),
        CountingSource::default(),
    )
    .await;
    let _watcher = gw.watch("key-1");
    let big = serde_json::to_vec(&serde_json::json!({
        "Status": "Completo", "Appkey": "key-1", "Padding": "x".repeat(600)
    }))
    .unwrap();
    let cases: [(Vec<u8>, u16, &str); 5] = [
        (big.clone(), 413, "payload_too_large"),
        (
            b"{\"Status\": \"Completo\", ".to_vec(),
            400,
            "malformed_body",
        ),
        (br#"{"Status":"Completo"}"#.to_vec(), 400, "malformed_body"),
        (body("Em processamento", "key-1"), 422, "unknown_status"),
        (body("Done", "key-1"), 422, "unknown_status"),
    ];
    for (payload, code, reason) in cases {
        let (status, json) = send(gw.post_basic(payload)).await;
        assert_eq!(
            (status, json["error"]["reason"].as_str()),
            (code, Some(reason))
        );
        assert!(json["error"]["message"].is_string());
    }
    // A chunked body declares no length: the limit applies while reading.
    assert_eq!(
        status_code(&post_chunked(gw.addr, "/webhooks/journey", &big).await),
        413
    );

    assert_eq!(gw.watches.stats().notices_received, 0);
    assert_eq!(gw.source.total.load(Ordering::SeqCst), 0);
    let stats = gw.receiver.stats();
    assert_eq!(stats.rejected(RejectReason::PayloadTooLarge), 2);
    assert_eq!(stats.rejected(RejectReason::MalformedBody), 2);
    assert_eq!(stats.rejected(RejectReason::UnknownStatus), 2);
    assert_eq!(stats.rejected_total(), 6);
}

#[tokio::test]
async fn the_receiver_answers_only_post_on_its_configured_path() {
    let hook = WebhookSettings {
        path: "/hooks/idv".to_owned(),
        ..webhook(basic(), None)
    };
    let gw = start(hook, watch_settings(), CountingSource::default()).await;
    assert!(gw.url.ends_with("/hooks/idv"));
    assert_eq!(send(gw.post_basic(body("Completo", "key-1"))).await.0, 202);
    let get = gw.client.get(&gw.url).send().await.unwrap();
    assert_eq!(get.status().as_u16(), 405);
    let elsewhere = gw
        .client
        .post(format!("http://{}/webhooks/journey", gw.addr))
        .basic_auth(USER, Some(PASSWORD))
        .body(body("Completo", "key-1"))
        .send()
        .await
        .unwrap();
    assert_eq!(elsewhere.status().as_u16(), 404);
}
