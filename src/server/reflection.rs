//! Server reflection in both versions clients ask for: `grpc.reflection.v1`
//! (grpcurl, current grpc clients) and `grpc.reflection.v1alpha` (Python's
//! `grpcio-reflection`, older grpcurl, Evans, several IDE plug-ins), as
//! grpc-go and grpc-java servers register them.
//!
//! Each listener advertises only what it serves: the public one its API,
//! health and reflection; the admin one `ChannelAdminService` and
//! reflection.

use tonic::transport::server::Router;
use tonic_reflection::server::Builder;

use super::StartError;

/// Both reflection services' names, advertised beside the served ones.
const REFLECTION_SERVICES: [&str; 2] = [
    "grpc.reflection.v1.ServerReflection",
    "grpc.reflection.v1alpha.ServerReflection",
];

/// Adds reflection v1 and v1alpha to `router`, advertising `services`
/// (fully-qualified names) described by the encoded descriptor `sets`.
pub(super) fn add_reflection<L>(
    router: Router<L>,
    services: &[&str],
    sets: &[&[u8]],
) -> Result<Router<L>, StartError> {
    let builder = || {
        let builder = sets.iter().fold(Builder::configure(), |b, set| {
            b.register_encoded_file_descriptor_set(set)
        });
        services
            .iter()
            .chain(&REFLECTION_SERVICES)
            .fold(builder, |b, name| b.with_service_name(*name))
    };
    let v1 = builder()
        .build_v1()
        .map_err(|e| StartError::Reflection(e.to_string()))?;
    let v1alpha = builder()
        .build_v1alpha()
        .map_err(|e| StartError::Reflection(e.to_string()))?;
    Ok(router.add_service(v1).add_service(v1alpha))
}
