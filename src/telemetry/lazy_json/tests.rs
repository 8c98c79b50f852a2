use tracing_subscriber::{Registry, layer::SubscriberExt};

use super::*;
use crate::telemetry::{
    CapturedLogs,
    lazy_fields::fixture::{eager_json, emit},
};

#[test]
fn lines_show_the_same_span_fields_as_the_eager_json_formatter() {
    let eager = CapturedLogs::new();
    tracing::subscriber::with_default(Registry::default().with(eager_json(&eager)), emit);

    let lazy = CapturedLogs::new();
    let subscriber = Registry::default()
        .with(LazyJsonSpanFields.and_then(eager_json(&lazy).fmt_fields(LazyJsonFields)));
    tracing::subscriber::with_default(subscriber, emit);

    let (eager, lazy) = (eager.contents(), lazy.contents());
    assert_eq!(lazy, eager);
    assert_eq!(lazy.lines().count(), 4, "{lazy}");
    assert!(
        lazy.contains(r#""idgate.journey_ref":"j-fedcba9876543210""#),
        "the last value recorded wins: {lazy}"
    );
    assert!(lazy.contains(r#""rpc.grpc.status_code":14"#), "{lazy}");
    assert!(lazy.contains(r#""type":"raw""#), "{lazy}");
}
