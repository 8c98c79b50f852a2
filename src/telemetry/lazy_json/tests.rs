use tracing_subscriber::{Registry, layer::SubscriberExt};

use super::*;
use crate::telemetry::{CapturedLogs, lazy_fields::fixture::emit};

/// A JSON fmt layer as `setup` builds it (without the time, which would
/// differ between two runs), writing into `logs`.
macro_rules! json_layer {
    ($logs:expr) => {
        tracing_subscriber::fmt::layer()
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(true)
            .without_time()
            .with_writer($logs.clone())
    };
}

#[test]
fn lines_show_the_same_span_fields_as_the_eager_json_formatter() {
    let eager = CapturedLogs::new();
    tracing::subscriber::with_default(Registry::default().with(json_layer!(eager)), emit);

    let lazy = CapturedLogs::new();
    let subscriber = Registry::default()
        .with(LazyJsonSpanFields.and_then(json_layer!(lazy).fmt_fields(LazyJsonFields)));
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
