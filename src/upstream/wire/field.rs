//! Request field names the spec fixes. The ones it does not show (the
//! `/credencial` login and password, the `/captcha` challenge key and
//! images, the `/document` image list and licence) are configurable in
//! `[upstream.fields]` ([`FieldsConfig`](crate::upstream::FieldsConfig)).

/// The journey's appkey, in every operation after `/appkey`.
pub const APPKEY: &str = "appkey";

/// `/appkey` form: the operator login.
pub const OPERATOR_LOGIN: &str = "user";
/// `/appkey` form: the credential token from `/credencial`, verbatim.
pub const CREDENTIAL_TOKEN: &str = "token";
/// `/appkey` form: the end user's CPF, digits only.
pub const CPF: &str = "cpf";
/// `/appkey` form: the end user's name.
pub const NAME: &str = "nome";
/// `/appkey` form: the birth date, `dd/MM/yyyy`.
pub const BIRTH_DATE: &str = "nascimento";
/// `/appkey` form: the caller's own reference of the end user.
pub const CUSTOMER_REFERENCE: &str = "idExternoCliente";

/// `/3d/session-token` JSON: the end user's SDK user agent.
pub const USER_AGENT: &str = "userAgent";
/// `/3d/liveness` JSON: the session token `/3d/session-token` issued.
pub const SESSION_TOKEN: &str = "sessionToken";
