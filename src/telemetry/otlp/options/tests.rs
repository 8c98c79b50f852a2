use std::path::PathBuf;

use super::*;

fn env_of<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
    move |name| {
        vars.iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| (*v).to_owned())
    }
}

fn settings(endpoint: Option<&str>, protocol: Option<OtlpProtocol>) -> OtlpSettings {
    OtlpSettings {
        endpoint: endpoint.map(str::to_owned),
        protocol,
        ca_file: None::<PathBuf>,
    }
}

#[test]
fn headers_are_percent_decoded_and_the_traces_variable_wins_per_key() {
    let env = env_of(&[
        (
            "OTEL_EXPORTER_OTLP_HEADERS",
            "Authorization=Bearer%20shared, x-tenant=ops,",
        ),
        (
            "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
            "authorization=Bearer%20traces",
        ),
    ]);
    let map = headers(&env).unwrap();
    assert_eq!(map.len(), 2);
    assert_eq!(map["authorization"], "Bearer traces");
    assert!(map["authorization"].is_sensitive());
    assert_eq!(map["x-tenant"], "ops");
}

#[test]
fn a_bad_header_is_refused_by_its_key_never_its_value() {
    let env = env_of(&[("OTEL_EXPORTER_OTLP_HEADERS", "x-ok=1,bad key=s3cr3t-value")]);
    let err = headers(&env).unwrap_err().to_string();
    assert!(err.contains("entry number 2"), "{err}");
    assert!(err.contains("OTEL_EXPORTER_OTLP_HEADERS"), "{err}");
    assert!(!err.contains("s3cr3t") && !err.contains("bad key"), "{err}");

    // A forgotten `=`: the whole entry may be the secret.
    let env = env_of(&[("OTEL_EXPORTER_OTLP_HEADERS", "Authorization Bearer s3cr3t")]);
    let err = headers(&env).unwrap_err().to_string();
    assert!(err.contains("entry number 1"), "{err}");
    assert!(!err.contains("s3cr3t"), "{err}");

    let env = env_of(&[("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "x-key=s3cr3t%0Avalue")]);
    let err = headers(&env).unwrap_err().to_string();
    assert!(err.contains("`x-key`"), "{err}");
    assert!(!err.contains("s3cr3t"), "{err}");
}

#[test]
fn compression_is_gzip_or_none_and_anything_else_is_refused_by_name() {
    assert!(!gzip(&env_of(&[])).unwrap());
    assert!(gzip(&env_of(&[("OTEL_EXPORTER_OTLP_COMPRESSION", "GZIP")])).unwrap());
    assert!(
        !gzip(&env_of(&[
            ("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip"),
            ("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "none"),
        ]))
        .unwrap()
    );
    let err = gzip(&env_of(&[(
        "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION",
        "zstd",
    )]))
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION") && err.contains("zstd"),
        "{err}"
    );
}

#[test]
fn the_timeout_is_milliseconds_ten_seconds_by_default() {
    assert_eq!(timeout(&env_of(&[])).unwrap(), Duration::from_secs(10));
    assert_eq!(
        timeout(&env_of(&[("OTEL_EXPORTER_OTLP_TIMEOUT", "2500")])).unwrap(),
        Duration::from_millis(2500)
    );
    for junk in ["0", "-1", "10s"] {
        let err = timeout(&env_of(&[("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", junk)]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT"), "{err}");
    }
}

#[test]
fn the_shared_endpoint_gains_the_traces_path_over_http_only() {
    let shared = env_of(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/")]);
    assert_eq!(
        endpoint(&settings(None, None), OtlpProtocol::HttpProtobuf, &shared),
        "http://collector:4318/v1/traces"
    );
    assert_eq!(
        endpoint(&settings(None, None), OtlpProtocol::Grpc, &shared),
        "http://collector:4318/"
    );
    let own = env_of(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"),
        (
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            "http://traces:9999/custom",
        ),
    ]);
    assert_eq!(
        endpoint(&settings(None, None), OtlpProtocol::HttpProtobuf, &own),
        "http://traces:9999/custom",
        "the traces variable is used as is"
    );
    assert_eq!(
        endpoint(
            &settings(Some("http://builder:1/x"), None),
            OtlpProtocol::HttpProtobuf,
            &own
        ),
        "http://builder:1/x",
        "the builder's endpoint wins"
    );
}

#[test]
fn a_bad_endpoint_fails_the_set_up_for_either_protocol() {
    for protocol in [OtlpProtocol::Grpc, OtlpProtocol::HttpProtobuf] {
        let result = span_target(&settings(Some("not a url"), Some(protocol)), &env_of(&[]));
        assert!(
            matches!(result, Err(TelemetryError::Endpoint(_))),
            "{protocol:?}: {result:?}"
        );
    }
}
