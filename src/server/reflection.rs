//! Server reflection in both versions clients ask for: `grpc.reflection.v1`
//! (grpcurl, current grpc clients) and `grpc.reflection.v1alpha` (Python's
//! `grpcio-reflection`, older grpcurl, Evans, several IDE plug-ins), as
//! grpc-go and grpc-java servers register them.
//!
//! Each listener advertises only what it serves: the public one its API,
//! health and reflection; the admin one `ChannelAdminService` and
//! reflection. It also *describes* only that: the descriptor sets are cut
//! to the files that define a served service and what they import, so
//! `FileContainingSymbol` for `idgate.v1.ChannelAdminService` (or one of
//! its messages) answers `NOT_FOUND` on the public port. A peer of the
//! public listener learns nothing of the admin surface, and the admin
//! listener's reflection sits behind its token, like the service it
//! describes: without the token a peer learns not even the method names.

use std::collections::BTreeSet;

use prost::Message as _;
use prost_types::FileDescriptorSet;
use tonic::{
    service::{Interceptor, interceptor::InterceptedService},
    transport::server::Router,
};
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
    add_reflection_behind(router, services, sets, Ok)
}

/// [`add_reflection`], each reflection call checked by `check` first (the
/// admin listener's token interceptor).
pub(super) fn add_reflection_behind<L, I>(
    router: Router<L>,
    services: &[&str],
    sets: &[&[u8]],
    check: I,
) -> Result<Router<L>, StartError>
where
    I: Interceptor + Clone + Send + Sync + 'static,
{
    let sets = sets
        .iter()
        .map(|set| serving_only(set, services))
        .collect::<Result<Vec<_>, _>>()?;
    let builder = || {
        let builder = sets.iter().fold(Builder::configure(), |b, set| {
            b.register_file_descriptor_set(set.clone())
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
    Ok(router
        .add_service(InterceptedService::new(v1, check.clone()))
        .add_service(InterceptedService::new(v1alpha, check)))
}

/// The files of the encoded set `set` that define one of `services`, and
/// the files they import (transitively); the others are left out.
fn serving_only(set: &[u8], services: &[&str]) -> Result<FileDescriptorSet, StartError> {
    let set = FileDescriptorSet::decode(set).map_err(|e| StartError::Reflection(e.to_string()))?;
    let defines_served = |f: &prost_types::FileDescriptorProto| {
        f.service.iter().any(|s| {
            let name = match f.package() {
                "" => s.name().to_owned(),
                package => format!("{package}.{}", s.name()),
            };
            services.contains(&name.as_str())
        })
    };
    let mut wanted: BTreeSet<&str> = BTreeSet::new();
    let mut pending: Vec<&str> = set
        .file
        .iter()
        .filter(|f| defines_served(f))
        .map(|f| f.name())
        .collect();
    while let Some(name) = pending.pop() {
        if !wanted.insert(name) {
            continue;
        }
        if let Some(file) = set.file.iter().find(|f| f.name() == name) {
            pending.extend(file.dependency.iter().map(String::as_str));
        }
    }
    let file = set
        .file
        .iter()
        .filter(|f| wanted.contains(f.name()))
        .cloned()
        .collect();
    Ok(FileDescriptorSet { file })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(set: &FileDescriptorSet) -> BTreeSet<&str> {
        set.file.iter().map(|f| f.name()).collect()
    }

    #[test]
    fn the_public_set_leaves_the_admin_file_out_and_the_admin_set_keeps_only_it() {
        let public = serving_only(
            crate::proto::FILE_DESCRIPTOR_SET,
            &["idgate.v1.JourneyService", "idgate.v1.DocumentService"],
        )
        .unwrap();
        let public = files(&public);
        assert!(public.contains("idgate/v1/journey.proto"), "{public:?}");
        assert!(public.contains("idgate/v1/result.proto"), "imports kept");
        assert!(
            !public.contains("idgate/v1/channel_admin.proto"),
            "{public:?}"
        );
        assert!(!public.contains("idgate/v1/liveness.proto"), "{public:?}");
        let admin = serving_only(
            crate::proto::FILE_DESCRIPTOR_SET,
            &["idgate.v1.ChannelAdminService"],
        )
        .unwrap();
        let admin = files(&admin);
        assert!(admin.contains("idgate/v1/channel_admin.proto"));
        assert!(!admin.contains("idgate/v1/journey.proto"), "{admin:?}");
    }
}
