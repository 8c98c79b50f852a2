//! The caller's W3C trace context reaches every upstream and channel call,
//! whether or not the gateway exports spans: unchanged (with its
//! `tracestate`) without export, still unsampled when the caller did not
//! sample, and under the gateway's own client span with export. A
//! recording proxy in front of each listener of a sandbox notes the
//! headers of every request the gateway sends.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use axum::{body::Bytes, extract::State, http::HeaderMap, response::IntoResponse};
use idgate::{
    config::{ChannelSpec, OperatorConfig, UpstreamConfig},
    proto::v1::{
        self, journey_service_client::JourneyServiceClient,
        liveness_service_client::LivenessServiceClient,
    },
    sandbox::{Sandbox, SandboxConfig, SystemClock},
    server::Gateway,
};

use crate::support::{
    gateway::{connect, happy_person, secret_file, start_gateway as start, test_config},
    net::serve,
    otlp_collector::Collector,
    telemetry::{collected_until, exported_telemetry, quiet_telemetry},
};

/// One request the recording proxy forwarded.
#[derive(Debug, Clone)]
struct Seen {
    path: String,
    traceparent: Option<String>,
    tracestate: Option<String>,
}

#[derive(Clone)]
struct Proxy {
    target: String,
    http: reqwest::Client,
    seen: Arc<Mutex<Vec<Seen>>>,
}

/// A recording HTTP proxy in front of `target` (an origin): it notes the
/// path and trace headers of every request, then forwards it.
async fn recording_proxy(target: String, seen: Arc<Mutex<Vec<Seen>>>) -> String {
    let proxy = Proxy {
        target,
        http: reqwest::Client::new(),
        seen,
    };
    let app = axum::Router::new().fallback(forward).with_state(proxy);
    format!("http://{}", serve(app).await)
}

async fn forward(
    State(proxy): State<Proxy>,
    method: axum::http::Method,
    uri: axum::http::Uri,
    headers: HeaderMap,
    body: Bytes,
) -> axum::response::Response {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    proxy.seen.lock().expect("lock").push(Seen {
        path: uri.path().to_owned(),
        traceparent: header("traceparent"),
        tracestate: header("tracestate"),
    });
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    let mut request = proxy
        .http
        .request(method, format!("{}{path}", proxy.target))
        .body(body);
    for name in ["content-type", "accept"] {
        if let Some(v) = headers.get(name) {
            request = request.header(name, v);
        }
    }
    let response = request.send().await.expect("sandbox answers");
    let status = response.status();
    let content_type = response.headers().get("content-type").cloned();
    let body = response.bytes().await.expect("sandbox body");
    let mut answer = (status, body).into_response();
    if let Some(ct) = content_type {
        answer.headers_mut().insert("content-type", ct);
    }
    answer
}

/// `http://host:port` of a URL.
fn origin(url: &str) -> String {
    let uri: axum::http::Uri = url.parse().expect("url");
    format!(
        "{}://{}",
        uri.scheme_str().expect("scheme"),
        uri.authority().expect("authority")
    )
}

/// `url` with its origin replaced by `proxy`.
fn through(url: &str, proxy: &str) -> String {
    format!("{proxy}{}", &url[origin(url).len()..])
}

/// `url` through the recording proxy of its origin (started on first use).
async fn proxied(
    proxies: &mut HashMap<String, String>,
    seen: &Arc<Mutex<Vec<Seen>>>,
    url: &str,
) -> String {
    let o = origin(url);
    let p = match proxies.get(&o) {
        Some(p) => p.clone(),
        None => {
            let p = recording_proxy(o.clone(), seen.clone()).await;
            proxies.insert(o, p.clone());
            p
        }
    };
    through(url, &p)
}

/// A sandbox, a recording proxy in front of each of its listeners, and
/// a gateway whose upstream and channels are the proxies.
struct Recorded {
    gateway: Gateway,
    seen: Arc<Mutex<Vec<Seen>>>,
    _sandbox: idgate::sandbox::SandboxHandle,
}

async fn recorded_gateway() -> Recorded {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let sandbox = Sandbox::start(SandboxConfig::default(), Arc::new(SystemClock))
        .await
        .expect("sandbox");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut proxies = HashMap::new();
    let mut config = test_config();
    config.upstream = Some(UpstreamConfig {
        base_url: proxied(&mut proxies, &seen, &sandbox.base_url()).await,
        result_base_url: proxied(&mut proxies, &seen, &sandbox.result_base_url()).await,
        ..UpstreamConfig::default()
    });
    crate::support::gateway::run_open(&mut config);
    let operator = SandboxConfig::default().operators[0].clone();
    let password_file = secret_file(&operator.password);
    config.operators = vec![OperatorConfig {
        name: "default".into(),
        login: operator.login,
        password_env: None,
        password_file: Some(password_file),
    }];
    let mut channels = Vec::new();
    for (i, c) in sandbox.channels().into_iter().enumerate() {
        let url = proxied(&mut proxies, &seen, &c.base_url).await;
        channels.push(ChannelSpec::new(c.name, url, i32::try_from(i).unwrap()));
    }
    config.channels = channels;
    Recorded {
        gateway: start(config).await,
        seen,
        _sandbox: sandbox,
    }
}

/// A caller's W3C context, different for every call.
struct Caller {
    trace_id: String,
    span_id: String,
}

impl Caller {
    fn new() -> Self {
        Caller {
            trace_id: uuid::Uuid::new_v4().simple().to_string(),
            span_id: uuid::Uuid::new_v4().simple().to_string()[..16].to_owned(),
        }
    }

    fn traceparent(&self) -> String {
        format!("00-{}-{}-01", self.trace_id, self.span_id)
    }

    fn request<T>(&self, message: T) -> tonic::Request<T> {
        let mut req = tonic::Request::new(message);
        let md = req.metadata_mut();
        md.insert("traceparent", self.traceparent().parse().unwrap());
        md.insert("tracestate", "vendor=opaque-7".parse().unwrap());
        req
    }
}

/// The requests recorded since the last call, emptied.
fn take(seen: &Mutex<Vec<Seen>>) -> Vec<Seen> {
    std::mem::take(&mut *seen.lock().expect("lock"))
}

fn assert_carried(caller: &Caller, seen: &[Seen], paths: &[&str]) {
    let recorded: Vec<&str> = seen.iter().map(|s| s.path.as_str()).collect();
    for path in paths {
        assert!(
            recorded.iter().any(|r| r.ends_with(path)),
            "{path} was called: {recorded:?}"
        );
    }
    for s in seen {
        assert_eq!(
            s.traceparent.as_deref(),
            Some(caller.traceparent().as_str()),
            "{} carries the caller's context unchanged",
            s.path
        );
        assert_eq!(
            s.tracestate.as_deref(),
            Some("vendor=opaque-7"),
            "{}",
            s.path
        );
    }
}

#[tokio::test]
async fn without_export_every_upstream_and_channel_call_carries_the_callers_trace() {
    let (_logs, _default) = quiet_telemetry();
    let rec = recorded_gateway().await;
    let channel = connect(rec.gateway.grpc_url()).await;

    let caller = Caller::new();
    let appkey = JourneyServiceClient::new(channel.clone())
        .create_journey(caller.request(happy_person()))
        .await
        .expect("create journey")
        .into_inner()
        .appkey;
    assert_carried(
        &caller,
        &take(&rec.seen),
        &["/service/captcha/credencial", "/service/captcha/appkey"],
    );

    let caller = Caller::new();
    let mut liveness = LivenessServiceClient::new(channel);
    let session = liveness
        .start_session3_d(caller.request(v1::StartSession3DRequest {
            appkey: appkey.clone(),
            user_agent: "trace-propagation".into(),
        }))
        .await
        .expect("start session")
        .into_inner();
    assert_carried(&caller, &take(&rec.seen), &["/3d/session-token"]);

    let caller = Caller::new();
    liveness
        .verify_liveness3_d(caller.request(v1::VerifyLiveness3DRequest {
            appkey,
            session_token: session.session_token,
            channel: session.channel,
        }))
        .await
        .expect("verify");
    assert_carried(&caller, &take(&rec.seen), &["/3d/liveness"]);

    rec.gateway.shutdown().await;
}

#[tokio::test]
async fn with_export_an_unsampled_callers_trace_still_reaches_the_upstream() {
    let collector = Collector::start().await;
    let (_telemetry, _logs, _default) = exported_telemetry(&collector);
    let rec = recorded_gateway().await;
    let caller = Caller::new();
    let mut req = tonic::Request::new(happy_person());
    req.metadata_mut().insert(
        "traceparent",
        format!("00-{}-{}-00", caller.trace_id, caller.span_id)
            .parse()
            .unwrap(),
    );
    JourneyServiceClient::new(connect(rec.gateway.grpc_url()).await)
        .create_journey(req)
        .await
        .expect("create journey");
    let seen = take(&rec.seen);
    assert_eq!(seen.len(), 2, "/credencial and /appkey: {seen:?}");
    for s in &seen {
        let tp = s.traceparent.as_deref().expect("traceparent");
        let parts: Vec<&str> = tp.split('-').collect();
        assert_eq!(
            parts[1], caller.trace_id,
            "{} joins the caller's trace",
            s.path
        );
        assert_eq!(parts[3], "00", "{} stays unsampled", s.path);
    }
    rec.gateway.shutdown().await;
}

#[tokio::test]
async fn with_export_the_upstream_sees_the_gateways_client_span_as_parent() {
    let collector = Collector::start().await;
    let (telemetry, _logs, _default) = exported_telemetry(&collector);
    let rec = recorded_gateway().await;
    let caller = Caller::new();
    JourneyServiceClient::new(connect(rec.gateway.grpc_url()).await)
        .create_journey(caller.request(happy_person()))
        .await
        .expect("create journey");
    let seen = take(&rec.seen);
    assert_eq!(seen.len(), 2, "/credencial and /appkey: {seen:?}");
    let parents: Vec<String> = seen
        .iter()
        .map(|s| {
            let tp = s.traceparent.as_deref().expect("traceparent");
            let parts: Vec<&str> = tp.split('-').collect();
            assert_eq!(
                parts[1], caller.trace_id,
                "{} joins the caller's trace",
                s.path
            );
            assert_ne!(parts[2], caller.span_id, "the gateway's span is the parent");
            parts[2].to_owned()
        })
        .collect();
    let spans = collected_until(&telemetry, &collector, |spans| {
        parents
            .iter()
            .all(|p| spans.iter().any(|s| &s.span_id == p))
    })
    .await;
    for parent in &parents {
        let client = spans.iter().find(|s| &s.span_id == parent).expect("span");
        assert_eq!(client.trace_id, caller.trace_id);
        assert!(
            client.name.starts_with("POST "),
            "a client span: {}",
            client.name
        );
        assert!(
            !client.parent_span_id.is_empty() && client.parent_span_id != caller.span_id,
            "the client span sits under the gateway's server span"
        );
    }
    rec.gateway.shutdown().await;
}
