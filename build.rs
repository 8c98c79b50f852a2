//! Compiles `proto/idgate/v1` with protox (pure Rust, no `protoc` needed) and
//! writes the file descriptor set that server reflection serves.

use std::{env, path::PathBuf};

/// Messages whose derived `Debug` would print a CPF, a name, a birth date,
/// an image or a bearer secret. Keep in step with `src/proto.rs`.
const REDACTED_DEBUG: &[&str] = &[
    "CreateJourneyRequest",
    "CreateJourneyResponse",
    "GetJourneyResultRequest",
    "GetJourneyResultResponse",
    "WatchJourneyRequest",
    "WatchJourneyResponse",
    "CreateChallengesRequest",
    "CreateChallengesResponse",
    "SubmitChallengeResponseRequest",
    "Snapshot",
    "StartSession3DRequest",
    "StartSession3DResponse",
    "VerifyLiveness3DRequest",
    "SubmitDocumentImagesRequest",
    "DocumentImage",
    "SubmitDigitalLicenceRequest",
    "JourneyResult",
    "DocumentAnalysis",
    "OcrData",
    "RgOcr",
    "CnhOcr",
    "DniOcr",
    "CinOcr",
    "DigitalCnhOcr",
    "Photos",
    "DocumentPhoto",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protos = [
        "proto/idgate/v1/journey.proto",
        "proto/idgate/v1/liveness.proto",
        "proto/idgate/v1/document.proto",
        "proto/idgate/v1/result.proto",
        "proto/idgate/v1/channel_admin.proto",
    ];
    for p in &protos {
        println!("cargo:rerun-if-changed={p}");
    }
    let fds = protox::compile(protos, ["proto"])?;
    let out = PathBuf::from(env::var("OUT_DIR")?);
    std::fs::write(
        out.join("idgate_descriptor.bin"),
        prost::Message::encode_to_vec(&fds),
    )?;
    tonic_prost_build::configure()
        .bytes(".")
        // Messages that carry personal data or bearer secrets get a
        // redacting `Debug` in src/proto.rs instead of the derived one.
        .skip_debug(REDACTED_DEBUG.iter().map(|m| format!(".idgate.v1.{m}")))
        // Undecodable bytes are the caller's fault (INVALID_ARGUMENT), not
        // the server's (INTERNAL, prost's codec).
        .codec_path("crate::proto::codec::GatewayCodec")
        .build_client(true)
        .build_server(true)
        .compile_fds(fds)?;
    Ok(())
}
