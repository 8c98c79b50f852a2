//! The generated `idgate.v1` protobuf API.
#![allow(
    missing_docs,
    clippy::doc_lazy_continuation,
    clippy::large_enum_variant
)]

/// `idgate.v1`: services and messages generated from `proto/idgate/v1`.
pub mod v1 {
    tonic::include_proto!("idgate.v1");
}

/// The encoded file descriptor set of `idgate.v1`, served by reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("idgate_descriptor");
