//! The REST operations of the identity-verification service, named once
//! for the client, the sandbox, errors, metrics and spans.

use std::fmt;

/// One REST operation of the identity-verification service.
///
/// The distinction that matters most is [`Operation::consumes_appkey`]: an
/// operation that binds or finishes the appkey must never be sent twice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    /// `POST /credencial`: operator login for a credential token.
    Credential,
    /// `POST /appkey`: a new appkey for one end user.
    Appkey,
    /// `POST /challenge`: 2D liveness challenges.
    Challenge,
    /// `POST /captcha`: the 2D liveness proof; binds the appkey.
    Captcha,
    /// `POST /3d/session-token`: a 3D liveness session.
    SessionToken3D,
    /// `POST /3d/liveness`: the 3D verdict; finishes the appkey.
    Liveness3D,
    /// `POST /document` with images.
    DocumentImages,
    /// `POST /document` with the digital licence.
    DigitalLicence,
    /// `POST {result}/document/result`.
    Result,
}

impl Operation {
    /// Every operation, for metric pre-registration and tables.
    pub const ALL: [Operation; 9] = [
        Operation::Credential,
        Operation::Appkey,
        Operation::Challenge,
        Operation::Captcha,
        Operation::SessionToken3D,
        Operation::Liveness3D,
        Operation::DocumentImages,
        Operation::DigitalLicence,
        Operation::Result,
    ];

    /// A stable, lower-case name for metric labels and span attributes.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Credential => "credential",
            Operation::Appkey => "appkey",
            Operation::Challenge => "challenge",
            Operation::Captcha => "captcha",
            Operation::SessionToken3D => "session_token_3d",
            Operation::Liveness3D => "liveness_3d",
            Operation::DocumentImages => "document_images",
            Operation::DigitalLicence => "digital_licence",
            Operation::Result => "result",
        }
    }

    /// True when the upstream may bind, finish or spend the appkey on this
    /// call, so a second attempt could act twice or fail spuriously. Such
    /// calls are never retried once the request may have left the gateway.
    /// `/appkey` itself creates a new appkey each time; it is retried only
    /// after a 401, which proves nothing was created.
    pub fn consumes_appkey(self) -> bool {
        matches!(
            self,
            Operation::Captcha
                | Operation::Liveness3D
                | Operation::DocumentImages
                | Operation::DigitalLicence
                | Operation::Appkey
        )
    }

    /// True when a failure after the request may have left puts a journey
    /// the caller holds in an unknown state (`OUTCOME_UNKNOWN`): the
    /// operations that consume an existing appkey. `/appkey` is not one:
    /// its caller holds nothing yet, so a failed `CreateJourney` is an
    /// ordinary failure that the caller may retry (an appkey the upstream
    /// may have created is unreachable and simply expires). The gateway
    /// itself still never resends `/appkey` ([`Self::consumes_appkey`]).
    pub fn outcome_matters_to_caller(self) -> bool {
        self.consumes_appkey() && self != Operation::Appkey
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
