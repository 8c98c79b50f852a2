//! The generated `idgate.v1` protobuf API, and [`codec`], the protobuf
//! codec every generated service and client uses.
#![allow(
    missing_docs,
    clippy::doc_lazy_continuation,
    clippy::large_enum_variant
)]

pub mod codec;

/// `idgate.v1`: services and messages generated from `proto/idgate/v1`.
pub mod v1 {
    tonic::include_proto!("idgate.v1");
}

/// The generated service traits and their tonic servers, under one path:
/// the API implements the traits, the server mounts the servers, and
/// neither names the generated `*_server` modules (whose paths read like
/// the gateway's own `server` module).
pub mod services {
    pub use super::v1::{
        channel_admin_service_server::{ChannelAdminService, ChannelAdminServiceServer},
        document_service_server::{DocumentService, DocumentServiceServer},
        journey_service_server::{JourneyService, JourneyServiceServer},
        liveness_service_server::{LivenessService, LivenessServiceServer},
    };
}

/// A `Debug` that names the message and prints none of its fields, for
/// the messages that carry personal data or bearer secrets (listed in
/// `build.rs`), so that a careless `?request` cannot leak them.
macro_rules! redacted_debug {
    ($($message:ident),* $(,)?) => {$(
        impl std::fmt::Debug for v1::$message {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(concat!(stringify!($message), " { <redacted> }"))
            }
        }
    )*};
}

redacted_debug!(
    CreateJourneyRequest,
    CreateJourneyResponse,
    GetJourneyResultRequest,
    GetJourneyResultResponse,
    WatchJourneyRequest,
    WatchJourneyResponse,
    CreateChallengesRequest,
    CreateChallengesResponse,
    SubmitChallengeResponseRequest,
    Snapshot,
    StartSession3DRequest,
    StartSession3DResponse,
    VerifyLiveness3DRequest,
    SubmitDocumentImagesRequest,
    DocumentImage,
    SubmitDigitalLicenceRequest,
    JourneyResult,
    DocumentAnalysis,
    OcrData,
    RgOcr,
    CnhOcr,
    DniOcr,
    CinOcr,
    DigitalCnhOcr,
    Photos,
    DocumentPhoto,
);

/// The encoded file descriptor set of `idgate.v1`, served by reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("idgate_descriptor");

#[cfg(test)]
mod tests {
    use super::v1;

    #[test]
    fn messages_with_personal_data_or_secrets_debug_print_no_field() {
        let req = v1::CreateJourneyRequest {
            cpf: "52998224725".into(),
            name: "Canary Name".into(),
            birth_date: "1990-01-01".into(),
            customer_reference: "REF".into(),
            operator_profile: String::new(),
            request_id: String::new(),
        };
        let printed = format!("{req:?}");
        assert_eq!(printed, "CreateJourneyRequest { <redacted> }");
        let session = v1::StartSession3DResponse {
            session_token: "canary-token".into(),
            ..Default::default()
        };
        assert!(!format!("{session:?}").contains("canary"));
    }
}
