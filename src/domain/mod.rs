//! Validated values, parsed at the edge, and the newtypes that hold secrets
//! and personal data.
//!
//! Every type here that holds an appkey, a token, a password, a CPF, a
//! name, a birth date or an image has a `Debug` that prints a redaction, so
//! a careless `?value` in a log line cannot leak it.
//!
//! [`Caller`] and its [`Permission`]s, [`JourneyScope`] and [`ResultView`]
//! are the vocabulary of authorization every layer shares.
//!
//! [`Operation`] names the REST operations of the spec: vocabulary shared
//! by the client, the sandbox, errors, spans and metrics.

mod caller;
mod cpf;
mod image;
mod journey_record;
mod journey_ref;
mod operation;
mod person;
mod request_id;
mod secret;
mod session_grant;

pub use caller::{
    Caller, CallerLimits, CallerName, JourneyScope, Permission, Permissions, ProfileGrant,
    ResultView, Revocation,
};
pub use cpf::Cpf;
pub use image::{ImageKind, ImagePayload, Snapshot};
pub use journey_record::{JourneyRecord, RequestKey};
pub use journey_ref::JourneyRef;
pub use operation::Operation;
pub use person::{BirthDate, CustomerReference, EndUser, PersonName};
pub use request_id::RequestId;
pub use secret::{
    AdminToken, Appkey, CallerToken, CredentialToken, MAX_KEY_CHARS, Password, SessionToken,
    parse_key,
};
pub(crate) use secret::{authorization_credentials, secrets_match};
pub use session_grant::SessionGrant;
