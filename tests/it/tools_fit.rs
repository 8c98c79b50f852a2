//! The gateway fits the tools its users already hold (issue 12): server
//! reflection in both versions, the caller's trace passed on whether or not
//! the gateway exports spans, and log lines that join their trace.
//!
//! Self-contained: a gateway on the embedded sandbox, every listener on
//! `127.0.0.1:0`, real sockets.

use std::{
    collections::BTreeSet,
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::Duration,
};

use idgate::{
    config::{Config, TelemetryConfig},
    server::Gateway,
    telemetry::{CapturedLogs, LogFormat, Telemetry, TelemetryBuilder},
};
use tonic::transport::Channel;
use tracing::dispatcher::DefaultGuard;

/// How long a test waits for what it awaits.
const WAIT: Duration = Duration::from_secs(20);

/// The admin bearer token of these tests' gateways.
use crate::support::gateway::ADMIN_TOKEN;

fn loopback() -> SocketAddr {
    ([127, 0, 0, 1], 0).into()
}

/// The shared test configuration: every listener on an ephemeral loopback
/// port, the embedded sandbox, an admin token file, no drain delay.
fn test_config() -> Config {
    crate::support::gateway::test_config()
}

async fn start(config: Config) -> Gateway {
    idgate::server::start(config).await.expect("gateway starts")
}

async fn connect(url: String) -> Channel {
    Channel::from_shared(url)
        .expect("url")
        .connect()
        .await
        .expect("connect")
}

mod reflection {
    use super::*;
    use tonic_reflection::pb::{v1 as r1, v1alpha as ralpha};

    /// The services a v1alpha reflection client lists on `channel`.
    async fn list_v1alpha(channel: Channel) -> BTreeSet<String> {
        use ralpha::{
            ServerReflectionRequest, server_reflection_client::ServerReflectionClient,
            server_reflection_request::MessageRequest, server_reflection_response::MessageResponse,
        };
        let request = ServerReflectionRequest {
            host: String::new(),
            message_request: Some(MessageRequest::ListServices(String::new())),
        };
        let mut responses = ServerReflectionClient::new(channel)
            .server_reflection_info(tokio_stream::iter([request]))
            .await
            .expect("v1alpha reflection is served")
            .into_inner();
        let response = responses
            .message()
            .await
            .expect("a response")
            .expect("one message");
        match response.message_response {
            Some(MessageResponse::ListServicesResponse(list)) => {
                list.service.into_iter().map(|s| s.name).collect()
            }
            other => panic!("unexpected reflection answer: {other:?}"),
        }
    }

    /// The services a v1 reflection client lists on `channel`.
    async fn list_v1(channel: Channel) -> BTreeSet<String> {
        use r1::{
            ServerReflectionRequest, server_reflection_client::ServerReflectionClient,
            server_reflection_request::MessageRequest, server_reflection_response::MessageResponse,
        };
        let request = ServerReflectionRequest {
            host: String::new(),
            message_request: Some(MessageRequest::ListServices(String::new())),
        };
        let mut responses = ServerReflectionClient::new(channel)
            .server_reflection_info(tokio_stream::iter([request]))
            .await
            .expect("v1 reflection is served")
            .into_inner();
        let response = responses
            .message()
            .await
            .expect("a response")
            .expect("one message");
        match response.message_response {
            Some(MessageResponse::ListServicesResponse(list)) => {
                list.service.into_iter().map(|s| s.name).collect()
            }
            other => panic!("unexpected reflection answer: {other:?}"),
        }
    }

    /// A v1alpha client asks for the file that defines a symbol.
    async fn v1alpha_file_of(channel: Channel, symbol: &str) -> usize {
        use ralpha::{
            ServerReflectionRequest, server_reflection_client::ServerReflectionClient,
            server_reflection_request::MessageRequest, server_reflection_response::MessageResponse,
        };
        let request = ServerReflectionRequest {
            host: String::new(),
            message_request: Some(MessageRequest::FileContainingSymbol(symbol.to_owned())),
        };
        let mut responses = ServerReflectionClient::new(channel)
            .server_reflection_info(tokio_stream::iter([request]))
            .await
            .expect("v1alpha reflection is served")
            .into_inner();
        match responses
            .message()
            .await
            .expect("a response")
            .and_then(|r| r.message_response)
        {
            Some(MessageResponse::FileDescriptorResponse(files)) => {
                files.file_descriptor_proto.len()
            }
            other => panic!("unexpected reflection answer: {other:?}"),
        }
    }

    fn names(list: &[&str]) -> BTreeSet<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[tokio::test]
    async fn public_listener_lists_its_services_over_v1alpha_and_v1_alike() {
        let (_logs, _default) = quiet_telemetry();
        let gw = start(test_config()).await;
        let channel = connect(gw.grpc_url()).await;
        let expected = names(&[
            "idgate.v1.JourneyService",
            "idgate.v1.LivenessService",
            "idgate.v1.DocumentService",
            "grpc.health.v1.Health",
            "grpc.reflection.v1.ServerReflection",
            "grpc.reflection.v1alpha.ServerReflection",
        ]);
        assert_eq!(list_v1alpha(channel.clone()).await, expected);
        assert_eq!(list_v1(channel.clone()).await, expected);
        assert!(
            v1alpha_file_of(channel, "idgate.v1.JourneyService").await >= 1,
            "v1alpha serves the descriptors, not only the names"
        );
        gw.shutdown().await;
    }

    #[tokio::test]
    async fn admin_listener_lists_only_the_channel_admin_service() {
        let (_logs, _default) = quiet_telemetry();
        let gw = start(test_config()).await;
        let admin = gw.admin_addr().expect("admin listener");
        let channel = connect(format!("http://{admin}")).await;
        let expected = names(&[
            "idgate.v1.ChannelAdminService",
            "grpc.reflection.v1.ServerReflection",
            "grpc.reflection.v1alpha.ServerReflection",
        ]);
        assert_eq!(list_v1alpha(channel.clone()).await, expected);
        assert_eq!(list_v1(channel).await, expected);
        gw.shutdown().await;
    }
}

/// Logs of one test, kept in memory, with no span export: installed for
/// the test's thread before anything starts (tracing caches per callsite
/// whether anyone listens, so every test of this binary installs one).
fn quiet_telemetry() -> (CapturedLogs, DefaultGuard) {
    quiet_telemetry_at("warn")
}

/// [`quiet_telemetry`] with log filter `directives`.
fn quiet_telemetry_at(directives: &str) -> (CapturedLogs, DefaultGuard) {
    let logs = CapturedLogs::new();
    let telemetry = TelemetryBuilder::new(&TelemetryConfig::default())
        .without_export()
        .log_format(LogFormat::Json)
        .log_filter(directives)
        .log_writer(logs.clone())
        .build()
        .expect("telemetry");
    (logs, telemetry.set_default())
}

/// A test certificate authority (rcgen) and a TLS listener for axum.
mod test_ca {
    use std::{net::SocketAddr, path::PathBuf, sync::Arc};

    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
    use tokio::net::{TcpListener, TcpStream};
    use tokio_rustls::{
        TlsAcceptor,
        rustls::{
            self,
            pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer},
        },
    };

    /// A certificate and its key, PEM and DER.
    pub struct Leaf {
        pub cert_pem: String,
        pub key_pem: String,
        pub cert_der: CertificateDer<'static>,
        pub key_der: Vec<u8>,
    }

    /// A CA made for one test, its certificate in a file of its own.
    pub struct TestCa {
        issuer: CertifiedIssuer<'static, KeyPair>,
        dir: PathBuf,
    }

    impl TestCa {
        pub fn new() -> TestCa {
            let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
            params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
            params
                .distinguished_name
                .push(DnType::CommonName, "idgate tools-fit test CA");
            let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate().expect("key"))
                .expect("CA certificate");
            let dir =
                std::env::temp_dir().join(format!("idgate-tools-fit-ca-{}", uuid::Uuid::new_v4()));
            std::fs::create_dir_all(&dir).expect("CA dir");
            std::fs::write(dir.join("ca.pem"), issuer.pem()).expect("CA file");
            TestCa { issuer, dir }
        }

        /// The CA certificate's file (PEM).
        pub fn ca_file(&self) -> PathBuf {
            self.dir.join("ca.pem")
        }

        /// Writes `leaf` as `NAME.pem` and `NAME.key` beside the CA file;
        /// returns both paths.
        pub fn write(&self, name: &str, leaf: &Leaf) -> (PathBuf, PathBuf) {
            let cert = self.dir.join(format!("{name}.pem"));
            let key = self.dir.join(format!("{name}.key"));
            std::fs::write(&cert, &leaf.cert_pem).expect("certificate file");
            std::fs::write(&key, &leaf.key_pem).expect("key file");
            (cert, key)
        }

        /// A certificate for `names` (DNS names or IP addresses).
        pub fn leaf(&self, names: &[&str]) -> Leaf {
            let key = KeyPair::generate().expect("key");
            let params =
                CertificateParams::new(names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>())
                    .expect("params");
            let cert = params.signed_by(&key, &self.issuer).expect("certificate");
            Leaf {
                cert_pem: cert.pem(),
                key_pem: key.serialize_pem(),
                cert_der: cert.der().clone(),
                key_der: key.serialize_der(),
            }
        }
    }

    /// Accepts TCP connections and completes their TLS handshake; a failed
    /// handshake is dropped and the next connection awaited.
    pub struct TlsListener {
        tcp: TcpListener,
        acceptor: TlsAcceptor,
    }

    impl TlsListener {
        pub fn new(tcp: TcpListener, identity: &Leaf) -> TlsListener {
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let config = rustls::ServerConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .expect("protocols")
                .with_no_client_auth()
                .with_single_cert(
                    vec![identity.cert_der.clone()],
                    PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(identity.key_der.clone())),
                )
                .expect("server certificate");
            TlsListener {
                tcp,
                acceptor: TlsAcceptor::from(Arc::new(config)),
            }
        }
    }

    impl axum::serve::Listener for TlsListener {
        type Io = tokio_rustls::server::TlsStream<TcpStream>;
        type Addr = SocketAddr;

        async fn accept(&mut self) -> (Self::Io, Self::Addr) {
            loop {
                let Ok((tcp, addr)) = self.tcp.accept().await else {
                    continue;
                };
                if let Ok(tls) = self.acceptor.accept(tcp).await {
                    return (tls, addr);
                }
            }
        }

        fn local_addr(&self) -> std::io::Result<Self::Addr> {
            self.tcp.local_addr()
        }
    }
}

/// A minimal OTLP trace collector on `127.0.0.1:0`: gRPC, or HTTP over TLS.
mod collector {
    use std::{
        net::SocketAddr,
        sync::{Arc, Mutex},
    };

    use opentelemetry_proto::tonic::collector::trace::v1::{
        ExportTraceServiceRequest, ExportTraceServiceResponse,
        trace_service_server::{TraceService, TraceServiceServer},
    };

    /// One received span, ids in lower-case hex.
    #[derive(Debug, Clone)]
    pub struct Collected {
        pub trace_id: String,
        pub span_id: String,
        pub parent_span_id: String,
        pub name: String,
    }

    #[derive(Clone, Default)]
    struct Store(Arc<Mutex<Vec<Collected>>>);

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    impl Store {
        fn keep(&self, request: ExportTraceServiceRequest) {
            let spans = request
                .resource_spans
                .into_iter()
                .flat_map(|rs| rs.scope_spans)
                .flat_map(|ss| ss.spans)
                .map(|s| Collected {
                    trace_id: hex(&s.trace_id),
                    span_id: hex(&s.span_id),
                    parent_span_id: hex(&s.parent_span_id),
                    name: s.name,
                });
            self.0.lock().expect("lock").extend(spans);
        }
    }

    #[tonic::async_trait]
    impl TraceService for Store {
        async fn export(
            &self,
            request: tonic::Request<ExportTraceServiceRequest>,
        ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
            self.keep(request.into_inner());
            Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
        }
    }

    /// `POST /v1/traces` of OTLP/HTTP with a protobuf body.
    async fn export_http(
        axum::extract::State(store): axum::extract::State<Store>,
        body: axum::body::Bytes,
    ) -> impl axum::response::IntoResponse {
        use prost::Message as _;
        match ExportTraceServiceRequest::decode(body) {
            Ok(request) => {
                store.keep(request);
                (
                    axum::http::StatusCode::OK,
                    [("content-type", "application/x-protobuf")],
                    ExportTraceServiceResponse::default().encode_to_vec(),
                )
            }
            Err(_) => (
                axum::http::StatusCode::BAD_REQUEST,
                [("content-type", "text/plain")],
                b"not an ExportTraceServiceRequest".to_vec(),
            ),
        }
    }

    /// A running collector.
    pub struct Collector {
        addr: SocketAddr,
        store: Store,
    }

    impl Collector {
        pub async fn start() -> Collector {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind");
            let addr = listener.local_addr().expect("addr");
            let store = Store::default();
            let service = TraceServiceServer::new(store.clone());
            tokio::spawn(async move {
                let _ = tonic::transport::Server::builder()
                    .add_service(service)
                    .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener))
                    .await;
            });
            Collector { addr, store }
        }

        /// Starts a collector serving OTLP/gRPC over TLS with `identity`.
        pub async fn start_grpc_tls(identity: &super::test_ca::Leaf) -> Collector {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind");
            let addr = listener.local_addr().expect("addr");
            let store = Store::default();
            let service = TraceServiceServer::new(store.clone());
            let tls = tonic::transport::ServerTlsConfig::new().identity(
                tonic::transport::Identity::from_pem(&identity.cert_pem, &identity.key_pem),
            );
            let server = tonic::transport::Server::builder()
                .tls_config(tls)
                .expect("server TLS");
            tokio::spawn(async move {
                let mut server = server;
                let _ = server
                    .add_service(service)
                    .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener))
                    .await;
            });
            Collector { addr, store }
        }

        /// Starts a collector serving OTLP/HTTP (`POST /v1/traces`,
        /// protobuf) over TLS with `identity`.
        pub async fn start_http_tls(identity: &super::test_ca::Leaf) -> Collector {
            let tcp = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind");
            let addr = tcp.local_addr().expect("addr");
            let store = Store::default();
            let app = axum::Router::new()
                .route("/v1/traces", axum::routing::post(export_http))
                .with_state(store.clone());
            let listener = super::test_ca::TlsListener::new(tcp, identity);
            tokio::spawn(async move {
                let _ = axum::serve(listener, app).await;
            });
            Collector { addr, store }
        }

        /// `https://127.0.0.1:PORT`.
        pub fn https_endpoint(&self) -> String {
            format!("https://{}", self.addr)
        }

        pub fn endpoint(&self) -> String {
            format!("http://{}", self.addr)
        }

        pub fn spans(&self) -> Vec<Collected> {
            self.store.0.lock().expect("lock").clone()
        }
    }
}

/// Telemetry exporting to `collector`, JSON logs at INFO into memory.
fn exported_telemetry(collector: &collector::Collector) -> (Telemetry, CapturedLogs, DefaultGuard) {
    exported_telemetry_with(
        TelemetryBuilder::new(&TelemetryConfig::default()).otlp_endpoint(collector.endpoint()),
    )
}

/// `builder` (export already set up) with JSON logs at INFO into memory.
fn exported_telemetry_with(builder: TelemetryBuilder) -> (Telemetry, CapturedLogs, DefaultGuard) {
    let logs = CapturedLogs::new();
    let telemetry = builder
        .log_format(LogFormat::Json)
        .log_filter("info")
        .log_writer(logs.clone())
        .build()
        .expect("telemetry");
    let guard = telemetry.set_default();
    (telemetry, logs, guard)
}

/// Flushes `telemetry` until `done` holds for the collected spans, within
/// [`WAIT`].
async fn collected_until(
    telemetry: &Telemetry,
    collector: &collector::Collector,
    done: impl Fn(&[collector::Collected]) -> bool,
) -> Vec<collector::Collected> {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        telemetry.guard().force_flush().await.expect("flush");
        let spans = collector.spans();
        if done(&spans) {
            return spans;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "spans never arrived: {:?}",
            spans.iter().map(|s| &s.name).collect::<Vec<_>>()
        );
        tokio::task::yield_now().await;
    }
}

mod propagation {
    use super::*;
    use std::collections::HashMap;

    use axum::{body::Bytes, extract::State, http::HeaderMap, response::IntoResponse};
    use idgate::{
        config::{ChannelSpec, OperatorConfig, UpstreamConfig},
        proto::v1::{
            self, journey_service_client::JourneyServiceClient,
            liveness_service_client::LivenessServiceClient,
        },
        sandbox::{Sandbox, SandboxConfig, SystemClock, samples},
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
        let listener = tokio::net::TcpListener::bind(loopback())
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        format!("http://{addr}")
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
        let password_file =
            std::env::temp_dir().join(format!("idgate-tools-fit-op-{}", uuid::Uuid::new_v4()));
        let operator = SandboxConfig::default().operators[0].clone();
        std::fs::write(&password_file, &operator.password).expect("password file");
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

    fn happy_person() -> v1::CreateJourneyRequest {
        let p = samples::HAPPY_PERSON;
        let parts: Vec<&str> = p.birth_date.split('/').collect();
        v1::CreateJourneyRequest {
            cpf: p.cpf.into(),
            name: p.name.into(),
            birth_date: format!("{}-{}-{}", parts[2], parts[1], parts[0]),
            customer_reference: "TOOLSFIT1".into(),
            operator_profile: String::new(),
            request_id: String::new(),
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
                user_agent: "tools-fit".into(),
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
        let collector = collector::Collector::start().await;
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
        let collector = collector::Collector::start().await;
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
}

/// The JSON log lines written so far.
fn json_lines(logs: &CapturedLogs) -> Vec<serde_json::Value> {
    logs.contents()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("a JSON line ({e}): {l}")))
        .collect()
}

/// The access log lines of `method` (`idgate.v1.JourneyService/CreateJourney`).
fn access_lines(logs: &CapturedLogs, method: &str) -> Vec<serde_json::Value> {
    json_lines(logs)
        .into_iter()
        .filter(|l| l["target"] == "idgate::access" && l["method"] == method)
        .collect()
}

mod logs {
    use super::*;
    use idgate::{
        proto::v1::{self, journey_service_client::JourneyServiceClient},
        sandbox::samples,
    };

    const CREATE: &str = "idgate.v1.JourneyService/CreateJourney";

    fn happy_person() -> v1::CreateJourneyRequest {
        let p = samples::HAPPY_PERSON;
        let parts: Vec<&str> = p.birth_date.split('/').collect();
        v1::CreateJourneyRequest {
            cpf: p.cpf.into(),
            name: p.name.into(),
            birth_date: format!("{}-{}-{}", parts[2], parts[1], parts[0]),
            customer_reference: "TOOLSFIT1".into(),
            operator_profile: String::new(),
            request_id: String::new(),
        }
    }

    fn traced<T>(trace_id: &str, message: T) -> tonic::Request<T> {
        let mut req = tonic::Request::new(message);
        req.metadata_mut().insert(
            "traceparent",
            format!("00-{trace_id}-00f067aa0ba902b7-01")
                .parse()
                .unwrap(),
        );
        req
    }

    fn access_on() -> Config {
        let mut config = test_config();
        config.telemetry.access_log = true;
        config
    }

    #[tokio::test]
    async fn a_json_log_line_inside_an_rpc_carries_the_trace_and_span_the_collector_received() {
        let collector = collector::Collector::start().await;
        let (telemetry, logs, _default) = exported_telemetry(&collector);
        let gw = start(access_on()).await;
        let trace_id = uuid::Uuid::new_v4().simple().to_string();
        JourneyServiceClient::new(connect(gw.grpc_url()).await)
            .create_journey(traced(&trace_id, happy_person()))
            .await
            .expect("create journey");
        let spans = collected_until(&telemetry, &collector, |spans| {
            spans
                .iter()
                .any(|s| s.name == CREATE && s.trace_id == trace_id)
        })
        .await;
        let server = spans
            .iter()
            .find(|s| s.name == CREATE && s.trace_id == trace_id)
            .expect("server span");
        assert_eq!(server.parent_span_id, "00f067aa0ba902b7");

        let lines = access_lines(&logs, CREATE);
        assert_eq!(lines.len(), 1, "one access line per RPC: {lines:?}");
        assert_eq!(lines[0]["trace_id"], trace_id.as_str());
        assert_eq!(lines[0]["span_id"], server.span_id.as_str());
        // Every line written inside the RPC joins the same trace.
        for line in json_lines(&logs)
            .iter()
            .filter(|l| l["span"]["name"] == "grpc.server")
        {
            assert_eq!(line["trace_id"], trace_id.as_str(), "{line}");
        }
        gw.shutdown().await;
    }

    #[tokio::test]
    async fn the_access_log_tells_method_code_duration_journey_and_peer_and_no_request_value() {
        let (logs, _default) = quiet_telemetry_at("info");
        let gw = start(access_on()).await;
        let trace_id = uuid::Uuid::new_v4().simple().to_string();
        let mut journeys = JourneyServiceClient::new(connect(gw.grpc_url()).await);
        journeys
            .create_journey(traced(&trace_id, happy_person()))
            .await
            .expect("create journey");
        let mut bad = happy_person();
        bad.cpf = "52110000138".into();
        let refused = journeys
            .create_journey(bad)
            .await
            .expect_err("an invalid CPF is refused");
        assert_eq!(refused.code(), tonic::Code::InvalidArgument);

        let lines = access_lines(&logs, CREATE);
        assert_eq!(lines.len(), 2, "{lines:?}");
        let ok = &lines[0];
        assert_eq!(ok["code"], 0);
        assert_eq!(ok["status"], "Ok");
        assert!(ok["duration_ms"].as_f64().is_some_and(|d| d > 0.0), "{ok}");
        assert!(
            ok["peer"]
                .as_str()
                .is_some_and(|p| p.starts_with("127.0.0.1:")),
            "{ok}"
        );
        assert!(
            ok["span"]["idgate.journey_ref"]
                .as_str()
                .is_some_and(|j| j.starts_with("j-")),
            "the journey reference is on the access line: {ok}"
        );
        // Without export, the trace id is the caller's.
        assert_eq!(ok["trace_id"], trace_id.as_str());
        assert_eq!(lines[1]["code"], tonic::Code::InvalidArgument as i32);
        assert!(
            lines[1].get("trace_id").is_none(),
            "an untraced call has no trace id"
        );

        let text = logs.contents();
        let p = samples::HAPPY_PERSON;
        for value in [p.cpf, p.name, p.birth_date, "52110000138", "TOOLSFIT1"] {
            assert!(!text.contains(value), "a request value reached the logs");
        }
        gw.shutdown().await;
    }
}

mod otlp {
    use super::*;
    use idgate::{
        proto::v1::{self, journey_service_client::JourneyServiceClient},
        sandbox::samples,
        telemetry::OtlpProtocol,
    };

    const CREATE: &str = "idgate.v1.JourneyService/CreateJourney";

    fn happy_person() -> v1::CreateJourneyRequest {
        let p = samples::HAPPY_PERSON;
        let parts: Vec<&str> = p.birth_date.split('/').collect();
        v1::CreateJourneyRequest {
            cpf: p.cpf.into(),
            name: p.name.into(),
            birth_date: format!("{}-{}-{}", parts[2], parts[1], parts[0]),
            customer_reference: "TOOLSFIT1".into(),
            operator_profile: String::new(),
            request_id: String::new(),
        }
    }

    /// Runs one traced `CreateJourney` on a gateway exporting through
    /// `builder`, and waits for its server span at `collector`.
    async fn journey_span_reaches(builder: TelemetryBuilder, collector: &collector::Collector) {
        let (telemetry, _logs, _default) = exported_telemetry_with(builder);
        let gw = start(test_config()).await;
        let trace_id = uuid::Uuid::new_v4().simple().to_string();
        let mut req = tonic::Request::new(happy_person());
        req.metadata_mut().insert(
            "traceparent",
            format!("00-{trace_id}-00f067aa0ba902b7-01")
                .parse()
                .unwrap(),
        );
        JourneyServiceClient::new(connect(gw.grpc_url()).await)
            .create_journey(req)
            .await
            .expect("create journey");
        let spans = collected_until(&telemetry, collector, |spans| {
            spans
                .iter()
                .any(|s| s.name == CREATE && s.trace_id == trace_id)
        })
        .await;
        assert!(
            spans
                .iter()
                .any(|s| s.trace_id == trace_id && s.name.starts_with("POST ")),
            "the upstream client spans arrive too"
        );
        gw.shutdown().await;
        telemetry.shutdown().await.expect("shutdown");
    }

    #[tokio::test]
    async fn traces_reach_an_https_collector_over_grpc_trusting_a_private_ca() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let ca = test_ca::TestCa::new();
        let collector =
            collector::Collector::start_grpc_tls(&ca.leaf(&["localhost", "127.0.0.1"])).await;
        let builder = TelemetryBuilder::new(&TelemetryConfig::default())
            .otlp_endpoint(collector.https_endpoint())
            .otlp_protocol(OtlpProtocol::Grpc)
            .otlp_ca_file(ca.ca_file());
        journey_span_reaches(builder, &collector).await;
    }

    #[tokio::test]
    async fn traces_reach_an_https_collector_over_http_protobuf_trusting_a_private_ca() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let ca = test_ca::TestCa::new();
        let collector =
            collector::Collector::start_http_tls(&ca.leaf(&["localhost", "127.0.0.1"])).await;
        let builder = TelemetryBuilder::new(&TelemetryConfig::default())
            .otlp_endpoint(format!("{}/v1/traces", collector.https_endpoint()))
            .otlp_protocol(OtlpProtocol::HttpProtobuf)
            .otlp_ca_file(ca.ca_file());
        journey_span_reaches(builder, &collector).await;
    }
}

mod tls_listeners {
    use super::*;
    use idgate::{
        cli::{
            channels::AdminTarget,
            journey::{DocumentChoice, JourneyPlan, LivenessMode, Person},
            tls::ClientTls,
        },
        domain::AdminToken,
        proto::v1::{self, journey_service_client::JourneyServiceClient},
        sandbox::samples,
        tls::ListenerTls,
    };
    use test_ca::TestCa;

    const SERVER_NAMES: [&str; 2] = ["localhost", "127.0.0.1"];

    fn happy_person() -> v1::CreateJourneyRequest {
        let p = samples::HAPPY_PERSON;
        let parts: Vec<&str> = p.birth_date.split('/').collect();
        v1::CreateJourneyRequest {
            cpf: p.cpf.into(),
            name: p.name.into(),
            birth_date: format!("{}-{}-{}", parts[2], parts[1], parts[0]),
            customer_reference: "TOOLSFIT1".into(),
            operator_profile: String::new(),
            request_id: String::new(),
        }
    }

    fn trusting(ca: &TestCa) -> ClientTls {
        ClientTls {
            ca: Some(ca.ca_file()),
            ..ClientTls::default()
        }
    }

    /// One `CreateJourney` over `channel`.
    async fn create(channel: Channel) -> Result<String, tonic::Status> {
        JourneyServiceClient::new(channel)
            .create_journey(happy_person())
            .await
            .map(|r| r.into_inner().appkey)
    }

    /// Connects to `url` with `tls` and creates a journey: `Err` when the
    /// handshake or the call is refused.
    async fn create_over(url: &str, tls: &ClientTls) -> Result<String, String> {
        let channel = tls
            .endpoint(url)
            .map_err(|e| e.to_string())?
            .connect()
            .await
            .map_err(|e| format!("connect: {e}"))?;
        create(channel).await.map_err(|s| format!("call: {s}"))
    }

    #[tokio::test]
    async fn a_journey_runs_over_mtls_and_a_client_without_a_certificate_is_refused() {
        let (_logs, _default) = quiet_telemetry();
        let _ = rustls::crypto::ring::default_provider().install_default();
        let ca = TestCa::new();
        let (cert_file, key_file) = ca.write("server", &ca.leaf(&SERVER_NAMES));
        let (client_cert, client_key) = ca.write("client", &ca.leaf(&["tools-fit-client"]));
        let mut config = test_config();
        config.tls.grpc = Some(ListenerTls {
            cert_file,
            key_file,
            client_ca_file: Some(ca.ca_file()),
        });
        config.sandbox.processing_delay_ms = 100;
        config.watch.poll_initial_ms = 50;
        config.watch.poll_max_ms = 200;
        let gw = start(config).await;
        let url = gw.grpc_url();
        assert!(url.starts_with("https://"), "{url}");

        // The whole journey, through the CLI's client with --ca --cert --key.
        let with_certificate = ClientTls {
            ca: Some(ca.ca_file()),
            cert: Some(client_cert),
            key: Some(client_key),
        };
        let p = samples::HAPPY_PERSON;
        let parts: Vec<&str> = p.birth_date.split('/').collect();
        let plan = JourneyPlan {
            gateway: url.clone(),
            liveness: LivenessMode::ThreeD,
            document: DocumentChoice::Rg,
            person: Person {
                cpf: p.cpf.into(),
                name: p.name.into(),
                birth_date: format!("{}-{}-{}", parts[2], parts[1], parts[0]),
                customer_reference: "TOOLSFIT1".into(),
            },
            operator_profile: String::new(),
            result_timeout: WAIT,
        };
        let mut out = String::new();
        idgate::cli::journey::run_with_tls(&plan, &with_certificate, &mut out)
            .await
            .unwrap_or_else(|e| panic!("the journey runs over mTLS: {e}\n{out}"));

        let refused = create_over(&url, &trusting(&ca)).await;
        assert!(
            refused.is_err(),
            "a client without a certificate is refused"
        );
        let plaintext =
            create_over(&format!("http://{}", gw.grpc_addr()), &ClientTls::default()).await;
        assert!(plaintext.is_err(), "plaintext is refused");
        gw.shutdown().await;
    }

    #[tokio::test]
    async fn after_a_reload_the_next_connection_gets_the_new_certificate_and_open_ones_stay() {
        let (_logs, _default) = quiet_telemetry();
        let _ = rustls::crypto::ring::default_provider().install_default();
        let (old_ca, new_ca) = (TestCa::new(), TestCa::new());
        let (cert_file, key_file) = old_ca.write("server", &old_ca.leaf(&SERVER_NAMES));
        let mut config = test_config();
        config.tls.grpc = Some(ListenerTls {
            cert_file: cert_file.clone(),
            key_file: key_file.clone(),
            client_ca_file: None,
        });
        let gw = start(config).await;
        let url = gw.grpc_url();
        let open = trusting(&old_ca)
            .endpoint(&url)
            .expect("endpoint")
            .connect()
            .await
            .expect("connect with the old CA");
        create(open.clone())
            .await
            .expect("served with the old certificate");

        // A new certificate from another CA, in the same files.
        let renewed = new_ca.leaf(&SERVER_NAMES);
        std::fs::write(&cert_file, &renewed.cert_pem).expect("renew certificate");
        std::fs::write(&key_file, &renewed.key_pem).expect("renew key");
        gw.reload().await.expect("reload (what SIGHUP runs)");

        create_over(&url, &trusting(&new_ca))
            .await
            .expect("the next connection gets the new certificate");
        assert!(
            create_over(&url, &trusting(&old_ca)).await.is_err(),
            "the old certificate is no longer served"
        );
        create(open)
            .await
            .expect("the connection opened before the reload still serves");
        gw.shutdown().await;
    }

    #[tokio::test]
    async fn the_http_and_admin_listeners_serve_tls_and_the_channels_cli_reaches_admin_over_https()
    {
        let (_logs, _default) = quiet_telemetry();
        let _ = rustls::crypto::ring::default_provider().install_default();
        let ca = TestCa::new();
        let (cert_file, key_file) = ca.write("server", &ca.leaf(&SERVER_NAMES));
        let section = ListenerTls {
            cert_file,
            key_file,
            client_ca_file: None,
        };
        let mut config = test_config();
        config.tls.http = Some(section.clone());
        config.tls.admin = Some(section);
        let gw = start(config).await;

        let pem = std::fs::read(ca.ca_file()).expect("CA file");
        let https = reqwest::Client::builder()
            .add_root_certificate(reqwest::Certificate::from_pem(&pem).expect("CA"))
            .build()
            .expect("client");
        let health = https
            .get(format!("https://{}/healthz", gw.http_addr()))
            .send()
            .await
            .expect("healthz over TLS");
        assert_eq!(health.status(), 200);
        assert_eq!(health.text().await.expect("body"), "ok");

        let admin = gw.admin_addr().expect("admin listener");
        let token = AdminToken::new(ADMIN_TOKEN).expect("token");
        let list = idgate::cli::channels::list(
            AdminTarget {
                addr: format!("https://{admin}"),
                tls: trusting(&ca),
            },
            &token,
        )
        .await
        .expect("idgate channels --ca list over https");
        assert!(list.contains("primary"), "{list}");
        assert!(
            idgate::cli::channels::list(&format!("http://{admin}"), &token)
                .await
                .is_err(),
            "plaintext is refused on a TLS admin listener"
        );
        gw.shutdown().await;
    }
}

mod otlp_metrics {
    use super::*;
    use idgate::{
        proto::v1::{self, journey_service_client::JourneyServiceClient},
        sandbox::samples,
    };
    use opentelemetry_proto::tonic::{
        collector::metrics::v1::{
            ExportMetricsServiceRequest, ExportMetricsServiceResponse,
            metrics_service_server::{MetricsService, MetricsServiceServer},
        },
        common::v1::any_value::Value,
        metrics::v1::{metric::Data, number_data_point},
    };

    /// One data point: metric name, string attributes, and the sum's value
    /// or the histogram's count.
    #[derive(Debug, Clone)]
    struct Point {
        name: String,
        attributes: Vec<(String, String)>,
        value: u64,
    }

    #[derive(Clone, Default)]
    struct Points(Arc<Mutex<Vec<Point>>>);

    #[tonic::async_trait]
    impl MetricsService for Points {
        async fn export(
            &self,
            request: tonic::Request<ExportMetricsServiceRequest>,
        ) -> Result<tonic::Response<ExportMetricsServiceResponse>, tonic::Status> {
            let mut points = Vec::new();
            let metrics = request
                .into_inner()
                .resource_metrics
                .into_iter()
                .flat_map(|r| r.scope_metrics)
                .flat_map(|s| s.metrics);
            for m in metrics {
                let attrs = |kvs: &[opentelemetry_proto::tonic::common::v1::KeyValue]| {
                    kvs.iter()
                        .filter_map(|kv| match kv.value.as_ref()?.value.as_ref()? {
                            Value::StringValue(v) => Some((kv.key.clone(), v.clone())),
                            _ => None,
                        })
                        .collect::<Vec<_>>()
                };
                match &m.data {
                    Some(Data::Sum(sum)) => {
                        for p in &sum.data_points {
                            let value = match p.value {
                                Some(number_data_point::Value::AsInt(i)) => i as u64,
                                Some(number_data_point::Value::AsDouble(d)) => d as u64,
                                None => 0,
                            };
                            points.push(Point {
                                name: m.name.clone(),
                                attributes: attrs(&p.attributes),
                                value,
                            });
                        }
                    }
                    Some(Data::Histogram(h)) => {
                        for p in &h.data_points {
                            points.push(Point {
                                name: m.name.clone(),
                                attributes: attrs(&p.attributes),
                                value: p.count,
                            });
                        }
                    }
                    _ => {}
                }
            }
            self.0.lock().expect("lock").extend(points);
            Ok(tonic::Response::new(ExportMetricsServiceResponse::default()))
        }
    }

    fn has(points: &[Point], name: &str, key: &str, value: &str) -> bool {
        points.iter().any(|p| {
            p.name == name
                && p.value > 0
                && p.attributes.iter().any(|(k, v)| k == key && v == value)
        })
    }

    #[tokio::test]
    async fn red_metrics_reach_an_otlp_collector_beside_the_prometheus_endpoint() {
        let listener = tokio::net::TcpListener::bind(loopback())
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let points = Points::default();
        let service = MetricsServiceServer::new(points.clone());
        tokio::spawn(async move {
            let _ = tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener))
                .await;
        });
        let (telemetry, _logs, _default) = exported_telemetry_with(
            TelemetryBuilder::new(&TelemetryConfig::default())
                .without_export()
                .otlp_metrics_endpoint(format!("http://{addr}")),
        );
        // Process-wide: the gateway's metrics take their instruments from it.
        telemetry.install_meter_provider();
        let gw = start(test_config()).await;
        let p = samples::HAPPY_PERSON;
        let parts: Vec<&str> = p.birth_date.split('/').collect();
        JourneyServiceClient::new(connect(gw.grpc_url()).await)
            .create_journey(v1::CreateJourneyRequest {
                cpf: p.cpf.into(),
                name: p.name.into(),
                birth_date: format!("{}-{}-{}", parts[2], parts[1], parts[0]),
                customer_reference: "TOOLSFIT1".into(),
                operator_profile: String::new(),
                request_id: String::new(),
            })
            .await
            .expect("create journey");

        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            telemetry.guard().force_flush().await.expect("flush");
            let got = points.0.lock().expect("lock").clone();
            if has(
                &got,
                "idgate.rpc.requests",
                "method",
                "idgate.v1.JourneyService/CreateJourney",
            ) && has(&got, "idgate.rpc.duration", "code", "OK")
                && has(&got, "idgate.upstream.requests", "operation", "appkey")
                && has(&got, "idgate.upstream.duration", "channel", "core")
            {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "RED metrics never arrived: {got:?}"
            );
            tokio::task::yield_now().await;
        }
        // And /metrics still serves the same series.
        let text = gw.metrics().encode().expect("encode");
        assert!(text.contains("idgate_rpc_requests_total"), "{text}");
        gw.shutdown().await;
    }
}
