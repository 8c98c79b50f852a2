//! The method names spans and metrics carry: those of the served API's
//! descriptors, plus health and reflection; any other path is `_OTHER`,
//! so a caller cannot mint label values.

use std::{collections::HashMap, sync::LazyLock};

use prost::Message;

/// Label and attribute value of a method outside the served API.
pub const OTHER: &str = "_OTHER";

/// Services served beside `idgate.v1` whose methods are labelled by name,
/// and whether each streams its response.
const EXTRA_METHODS: [(&str, bool); 4] = [
    ("grpc.health.v1.Health/Check", false),
    ("grpc.health.v1.Health/Watch", true),
    (
        "grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
        true,
    ),
    (
        "grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
        true,
    ),
];

/// `package.Service/Method` of every RPC the gateway serves, and whether it
/// streams its response. (Looked up on every call, never written after
/// start: a fast hasher.)
static KNOWN_METHODS: LazyLock<HashMap<String, bool, foldhash::fast::RandomState>> =
    LazyLock::new(|| {
        let mut known: HashMap<String, bool, foldhash::fast::RandomState> = EXTRA_METHODS
            .iter()
            .map(|(m, streams)| ((*m).to_owned(), *streams))
            .collect();
        // The descriptor set is compiled in by build.rs; should it ever fail to
        // decode, methods are reported as _OTHER rather than the server failing.
        if let Ok(fds) = prost_types::FileDescriptorSet::decode(crate::proto::FILE_DESCRIPTOR_SET) {
            for file in &fds.file {
                let package = file.package();
                for service in &file.service {
                    for method in &service.method {
                        known.insert(
                            format!("{package}.{}/{}", service.name(), method.name()),
                            method.server_streaming(),
                        );
                    }
                }
            }
        }
        known
    });

/// The `(full method, service, method)` of a request path, or `_OTHER`s,
/// and whether the method streams its response (true when unknown).
pub(super) fn method_of(path: &str) -> ((&'static str, &'static str, &'static str), bool) {
    path.strip_prefix('/')
        .and_then(|p| KNOWN_METHODS.get_key_value(p))
        .and_then(|(full, streams)| {
            let full = full.as_str();
            let (service, method) = full.split_once('/')?;
            Some(((full, service, method), *streams))
        })
        .unwrap_or(((OTHER, OTHER, OTHER), true))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn served_methods_are_known_and_other_paths_are_other() {
        assert_eq!(
            method_of("/idgate.v1.JourneyService/CreateJourney"),
            (
                (
                    "idgate.v1.JourneyService/CreateJourney",
                    "idgate.v1.JourneyService",
                    "CreateJourney"
                ),
                false
            )
        );
        assert_eq!(
            method_of("/grpc.health.v1.Health/Check").0.2,
            "Check",
            "health is labelled by name"
        );
        assert_eq!(
            method_of("/idgate.v1.JourneyService/j-secret-123"),
            ((OTHER, OTHER, OTHER), true)
        );
        assert_eq!(method_of("no-slash"), ((OTHER, OTHER, OTHER), true));
        assert!(method_of("/idgate.v1.JourneyService/WatchJourney").1);
        assert!(method_of("/grpc.health.v1.Health/Watch").1);
    }
}
