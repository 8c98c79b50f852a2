//! The collector's `LogsService` (OTLP/gRPC) and `POST /v1/logs`
//! (OTLP/HTTP): audit records exported as OTLP logs, kept as they came.

use opentelemetry_proto::tonic::{
    collector::logs::v1::{
        ExportLogsServiceRequest, ExportLogsServiceResponse, logs_service_server::LogsService,
    },
    common::v1::any_value::Value,
};
use prost::Message as _;

use super::Service;

/// One log record as the tests compare it.
#[derive(Debug, Clone, PartialEq)]
pub struct CollectedLog {
    /// The record's body, as a string.
    pub body: String,
    /// Its scope's name.
    pub scope: String,
    /// `service.name` of its resource.
    pub service: String,
    /// Its attributes, string values only.
    pub attributes: Vec<(String, String)>,
    /// Its trace id in hex (empty when none).
    pub trace_id: String,
}

impl CollectedLog {
    /// The string attribute `key`.
    pub fn attr(&self, key: &str) -> Option<&str> {
        self.attributes
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

fn text(value: Option<&opentelemetry_proto::tonic::common::v1::AnyValue>) -> String {
    match value.and_then(|v| v.value.as_ref()) {
        Some(Value::StringValue(s)) => s.clone(),
        Some(other) => format!("{other:?}"),
        None => String::new(),
    }
}

pub(super) fn collect(request: ExportLogsServiceRequest) -> Vec<CollectedLog> {
    let mut out = Vec::new();
    for resource in request.resource_logs {
        let service = resource
            .resource
            .iter()
            .flat_map(|r| &r.attributes)
            .find(|kv| kv.key == "service.name")
            .map(|kv| text(kv.value.as_ref()))
            .unwrap_or_default();
        for scope in resource.scope_logs {
            let scope_name = scope.scope.map(|s| s.name).unwrap_or_default();
            for record in scope.log_records {
                out.push(CollectedLog {
                    body: text(record.body.as_ref()),
                    scope: scope_name.clone(),
                    service: service.clone(),
                    attributes: record
                        .attributes
                        .iter()
                        .map(|kv| (kv.key.clone(), text(kv.value.as_ref())))
                        .collect(),
                    trace_id: super::hex(&record.trace_id),
                });
            }
        }
    }
    out
}

#[tonic::async_trait]
impl LogsService for Service {
    async fn export(
        &self,
        request: tonic::Request<ExportLogsServiceRequest>,
    ) -> Result<tonic::Response<ExportLogsServiceResponse>, tonic::Status> {
        self.0.keep_logs(collect(request.into_inner()));
        Ok(tonic::Response::new(ExportLogsServiceResponse::default()))
    }
}

/// `POST /v1/logs` of OTLP/HTTP with a protobuf body.
pub(super) async fn export_logs_http(
    axum::extract::State(service): axum::extract::State<Service>,
    body: axum::body::Bytes,
) -> impl axum::response::IntoResponse {
    let Ok(request) = ExportLogsServiceRequest::decode(body) else {
        return (
            axum::http::StatusCode::BAD_REQUEST,
            b"not an ExportLogsServiceRequest".to_vec(),
        );
    };
    service.0.keep_logs(collect(request));
    (
        axum::http::StatusCode::OK,
        ExportLogsServiceResponse::default().encode_to_vec(),
    )
}
