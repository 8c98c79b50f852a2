//! What `idgate journey` is asked to run: the liveness proof, the
//! document, the end user, where and how long to wait. A leaf: the
//! journey driver and its sample inputs both read it.

use std::{fmt, time::Duration};

/// Which liveness proof the journey runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LivenessMode {
    /// 2D challenges and snapshots.
    #[value(name = "2d")]
    TwoD,
    /// A 3D session on a vendor channel.
    #[value(name = "3d")]
    ThreeD,
}

/// Which document the journey submits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DocumentChoice {
    /// RG, front and back.
    Rg,
    /// CNH (paper model), front and back.
    Cnh,
    /// CNH (2022 model), front and back.
    Cnh2022,
    /// DNI, front and back.
    Dni,
    /// CIN, front and back.
    Cin,
    /// CRNM, front and back.
    Crnm,
    /// Passport, front and back.
    Passport,
    /// Digital licence: an image of its QR code.
    LicenceImage,
    /// Digital licence: the PDF exported by the app.
    LicencePdf,
    /// Digital licence: the QR code's binary.
    LicenceBinary,
}

/// The end user of the journey. Personal data: `Debug` redacts it.
#[derive(Clone)]
pub struct Person {
    /// CPF.
    pub cpf: String,
    /// Name.
    pub name: String,
    /// Birth date, `YYYY-MM-DD`.
    pub birth_date: String,
    /// Customer reference.
    pub customer_reference: String,
}

impl fmt::Debug for Person {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Person(<redacted>)")
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub struct JourneyPlan {
    /// The gateway's gRPC address.
    pub gateway: String,
    /// 2D or 3D.
    pub liveness: LivenessMode,
    /// The document to submit.
    pub document: DocumentChoice,
    /// The end user.
    pub person: Person,
    /// Operator profile (empty: the gateway's default).
    pub operator_profile: String,
    /// How long to wait for the result.
    pub result_timeout: Duration,
}
