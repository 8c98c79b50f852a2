//! The public RPCs as the door knows them: for each method path, the
//! operation a caller must be allowed ([`Permission`]), whose
//! configuration name (`[[callers]] operations`) is also the `operation`
//! its audit record carries, whether it releases a result (the caller's
//! view is recorded), whether it is a stream (a watch slot, not a call
//! slot), the largest request message it accepts ([`MessageSize`]: only
//! the document RPCs take document-sized messages), how it names its
//! journey ([`Naming`]), what it bills ([`BilledOperation`]) and the
//! upstream operation it sends ([`Operation`]). One table, so that a
//! method cannot be served without a row, and so that what a call costs
//! and whose journey it touches is decided once, by the door, before
//! its handler runs: a unit test reads the proto's descriptor and fails
//! on a public method missing here.

use crate::{
    domain::{Operation, Permission},
    spend::BilledOperation,
};

/// One public RPC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rpc {
    /// The HTTP/2 path: `/<package>.<Service>/<Method>`.
    pub path: &'static str,
    /// What the caller must be allowed (`None`: any configured caller,
    /// reflection); its name is the `operation` of the call's audit
    /// record.
    pub permission: Option<Permission>,
    /// True when it releases a journey result (the view is recorded).
    pub releases: bool,
    /// True for a server stream (`WatchJourney`).
    pub stream: bool,
    /// Which request-message limit applies.
    pub message: MessageSize,
    /// How the request names its journey.
    pub journey: Naming,
    /// What the door bills before the handler runs (`CreateJourney`'s
    /// bill is the journey room's, after its idempotency check).
    pub billing: Option<BilledOperation>,
    /// The upstream operation the call sends, marked on its audit record
    /// once every check has passed (a call cancelled from then on is
    /// recorded with it); `None`: it sends none itself (a watch reads
    /// results later, on its own).
    pub upstream: Option<Operation>,
}

/// How a public request names the journey it acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Naming {
    /// It names none: it makes one (`CreateJourney`).
    Creates,
    /// By its appkey.
    Appkey,
    /// By its appkey or its reference (`WatchJourney`).
    AppkeyOrReference,
    /// It names none and acts on none (reflection).
    None,
}

impl Rpc {
    /// The `operation` of its audit record: the permission's
    /// configuration name, or [`REFLECTION_OPERATION`] for the row that
    /// needs none.
    pub fn operation(&self) -> &'static str {
        self.permission
            .map_or(REFLECTION_OPERATION, Permission::as_str)
    }
}

/// The two request-message limits of `[limits]`: a message is refused as
/// soon as its length prefix is over its RPC's (Envoy's per-connection
/// buffer limits, grpc-go's per-method `MaxRecvMsgSize`), so that no RPC
/// but the document ones can make the gateway hold a large message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageSize {
    /// A few hundred bytes of fields: `max_small_message_bytes`.
    Small,
    /// Images: `max_grpc_message_bytes`.
    Document,
}

/// A unary call on the journey its appkey names, that sends `upstream`
/// and bills nothing.
const fn rpc(path: &'static str, permission: Permission, upstream: Operation) -> Rpc {
    Rpc {
        path,
        permission: Some(permission),
        releases: false,
        stream: false,
        message: MessageSize::Small,
        journey: Naming::Appkey,
        billing: None,
        upstream: Some(upstream),
    }
}

/// Every public RPC; nothing else on the public listener is admitted as
/// one (health and reflection pass through the door untouched).
pub const RPCS: [Rpc; 9] = [
    Rpc {
        journey: Naming::Creates,
        billing: Some(BilledOperation::CreateJourney),
        ..rpc(
            "/idgate.v1.JourneyService/CreateJourney",
            Permission::CreateJourney,
            Operation::Credential,
        )
    },
    Rpc {
        releases: true,
        ..rpc(
            "/idgate.v1.JourneyService/GetJourneyResult",
            Permission::ReadResult,
            Operation::Result,
        )
    },
    Rpc {
        releases: true,
        stream: true,
        journey: Naming::AppkeyOrReference,
        upstream: None,
        ..rpc(
            "/idgate.v1.JourneyService/WatchJourney",
            Permission::Watch,
            Operation::Result,
        )
    },
    rpc(
        "/idgate.v1.LivenessService/CreateChallenges",
        Permission::Challenges2D,
        Operation::Challenge,
    ),
    rpc(
        "/idgate.v1.LivenessService/SubmitChallengeResponse",
        Permission::Challenges2D,
        Operation::Captcha,
    ),
    Rpc {
        billing: Some(BilledOperation::StartSession3D),
        ..rpc(
            "/idgate.v1.LivenessService/StartSession3D",
            Permission::Session3D,
            Operation::SessionToken3D,
        )
    },
    rpc(
        "/idgate.v1.LivenessService/VerifyLiveness3D",
        Permission::Verify3D,
        Operation::Liveness3D,
    ),
    Rpc {
        message: MessageSize::Document,
        billing: Some(BilledOperation::SubmitDocuments),
        ..rpc(
            "/idgate.v1.DocumentService/SubmitDocumentImages",
            Permission::Documents,
            Operation::DocumentImages,
        )
    },
    Rpc {
        message: MessageSize::Document,
        billing: Some(BilledOperation::SubmitDocuments),
        ..rpc(
            "/idgate.v1.DocumentService/SubmitDigitalLicence",
            Permission::Documents,
            Operation::DigitalLicence,
        )
    },
];

/// The public RPC served at `path`, if it is one.
pub fn rpc_of(path: &str) -> Option<&'static Rpc> {
    RPCS.iter().find(|r| r.path == path)
}

/// The `operation` of an audit record about a call to `path` written
/// before the door (`CALLER_UNKNOWN`, by the auth layer): its row's, or
/// [`UNKNOWN_OPERATION`] for a path with no row, never the path itself
/// (the caller chose it).
pub fn audit_operation(path: &str) -> &'static str {
    match rpc_of(path) {
        Some(row) => row.operation(),
        None if is_reflection(path) => REFLECTION_OPERATION,
        None => UNKNOWN_OPERATION,
    }
}

/// Whether `path` is server reflection's (v1 or v1alpha), which the door
/// admits as a stream any configured caller may open.
pub fn is_reflection(path: &str) -> bool {
    [
        "/grpc.reflection.v1.ServerReflection/",
        "/grpc.reflection.v1alpha.ServerReflection/",
    ]
    .iter()
    .any(|p| path.starts_with(p))
}

/// The row reflection is admitted under: a stream of small messages that
/// needs no permission (listing the API is every configured caller's);
/// its audit records say [`REFLECTION_OPERATION`].
pub const REFLECTION: Rpc = Rpc {
    path: "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
    permission: None,
    releases: false,
    stream: true,
    message: MessageSize::Small,
    journey: Naming::None,
    billing: None,
    upstream: None,
};

/// The `operation` of a reflection stream's audit record.
pub const REFLECTION_OPERATION: &str = "reflection";

/// The `operation` of an audit record about a path that is no public RPC.
pub const UNKNOWN_OPERATION: &str = "unknown";

#[cfg(test)]
mod tests {
    use prost::Message as _;

    use super::*;

    #[test]
    fn a_record_names_an_rpc_as_callers_operations_do_and_any_other_path_unknown() {
        for (path, operation) in [
            (
                "/idgate.v1.LivenessService/CreateChallenges",
                "challenges_2d",
            ),
            ("/idgate.v1.JourneyService/GetJourneyResult", "read_result"),
            (
                "/idgate.v1.JourneyService/j-0123456789abcdef",
                UNKNOWN_OPERATION,
            ),
            (
                "/idgate.v1.ChannelAdminService/ProbeChannel",
                UNKNOWN_OPERATION,
            ),
            ("", UNKNOWN_OPERATION),
        ] {
            assert_eq!(audit_operation(path), operation, "{path}");
        }
    }

    #[test]
    fn every_public_method_of_the_proto_has_its_row() {
        let set = prost_types::FileDescriptorSet::decode(crate::proto::FILE_DESCRIPTOR_SET)
            .expect("the embedded descriptor set decodes");
        let mut paths = Vec::new();
        for file in &set.file {
            let package = file.package();
            for service in &file.service {
                if service.name() == "ChannelAdminService" {
                    continue;
                }
                for method in &service.method {
                    paths.push(format!("/{package}.{}/{}", service.name(), method.name()));
                }
            }
        }
        assert_eq!(paths.len(), RPCS.len(), "{paths:?}");
        for path in &paths {
            let row = rpc_of(path).unwrap_or_else(|| panic!("{path} has no row"));
            assert_eq!(row.stream, path.ends_with("/WatchJourney"), "{path}");
            let document = path.starts_with("/idgate.v1.DocumentService/");
            assert_eq!(row.message == MessageSize::Document, document, "{path}");
        }
    }
}
