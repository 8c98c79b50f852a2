//! Bearer secrets: appkeys, session tokens, credential tokens, passwords;
//! and the constant-time comparison of presented secrets.

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// Defines a newtype over `SecretString` whose `Debug` prints a redaction,
/// with `expose`, `PartialEq` and `Eq` (not constant-time: check presented
/// credentials with [`secrets_match`]) and an infallible `new`. The
/// `@without_new` form leaves `new` to the caller, for types that refuse
/// some values (the admin token refuses a blank one).
macro_rules! secret_newtype {
    (@without_new $(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone)]
        pub struct $name(::secrecy::SecretString);

        impl $name {
            /// The secret itself, for the one place that must send it.
            pub fn expose(&self) -> &str {
                ::secrecy::ExposeSecret::expose_secret(&self.0)
            }
        }

        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(concat!(stringify!($name), "(<redacted>)"))
            }
        }

        impl PartialEq for $name {
            fn eq(&self, other: &Self) -> bool {
                self.expose() == other.expose()
            }
        }

        impl Eq for $name {}
    };
    ($(#[$doc:meta])* $name:ident) => {
        secret_newtype!(@without_new $(#[$doc])* $name);

        impl $name {
            /// Wraps a secret value.
            pub fn new(value: impl Into<String>) -> Self {
                Self(::secrecy::SecretString::from(value.into()))
            }
        }
    };
}

/// True when the secrets `a` and `b` are equal. Compares their SHA-256
/// digests in constant time, so neither the content nor the length of the
/// expected secret leaks through timing.
pub(crate) fn secrets_match(a: impl AsRef<[u8]>, b: impl AsRef<[u8]>) -> bool {
    let digest = |s: &[u8]| -> [u8; 32] { Sha256::digest(s).into() };
    digest(a.as_ref()).ct_eq(&digest(b.as_ref())).into()
}

/// The credentials of an `Authorization` header value of `scheme`
/// (`Basic`, `Bearer`; compared case-insensitively), trimmed. `None` when
/// the header uses another scheme or has no credentials part.
pub(crate) fn authorization_credentials<'a>(header: &'a str, scheme: &str) -> Option<&'a str> {
    let (presented, credentials) = header.trim().split_once(' ')?;
    presented
        .eq_ignore_ascii_case(scheme)
        .then(|| credentials.trim())
}

/// The access key of one journey, issued by `/appkey`. Whoever holds it
/// can act on the journey and read its result.
///
/// It carries its journey reference once derived: one call names its
/// journey on the server span, the audit record, the channel binding and
/// the client span, and the reference is a SHA-256 of the key; deriving it
/// once per appkey value keeps that hash off the call path's repeats.
#[derive(Clone)]
pub struct Appkey {
    key: ::secrecy::SecretString,
    journey: std::sync::OnceLock<super::JourneyRef>,
}

impl Appkey {
    /// Wraps a secret value.
    pub fn new(value: impl Into<String>) -> Self {
        Self {
            key: ::secrecy::SecretString::from(value.into()),
            journey: std::sync::OnceLock::new(),
        }
    }

    /// The secret itself, for the one place that must send it.
    pub fn expose(&self) -> &str {
        ::secrecy::ExposeSecret::expose_secret(&self.key)
    }

    /// The journey reference, derived on first use.
    pub(crate) fn journey_ref(
        &self,
        derive: impl FnOnce() -> super::JourneyRef,
    ) -> &super::JourneyRef {
        self.journey.get_or_init(derive)
    }
}

impl std::fmt::Debug for Appkey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Appkey(<redacted>)")
    }
}

impl PartialEq for Appkey {
    fn eq(&self, other: &Self) -> bool {
        self.expose() == other.expose()
    }
}

impl Eq for Appkey {}
/// Longest appkey or other opaque key accepted from outside (a caller or a
/// notice): far above real ones, low enough to refuse junk at the edge.
pub const MAX_KEY_CHARS: usize = 512;

/// Checks an opaque bearer key (appkey, session token, challenge key):
/// present, at most [`MAX_KEY_CHARS`] characters, no white space or
/// control character inside. Returns it trimmed; the error names the rule,
/// never the value.
pub fn parse_key(input: &str) -> Result<&str, &'static str> {
    let trimmed = input.trim();
    if trimmed.is_empty() {
        return Err("is required");
    }
    if trimmed.chars().count() > MAX_KEY_CHARS {
        return Err("is longer than 512 characters");
    }
    if trimmed.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err("must not contain white space or control characters");
    }
    Ok(trimmed)
}

impl Appkey {
    /// An appkey from outside, checked by [`parse_key`].
    pub fn parse(input: &str) -> Result<Self, &'static str> {
        parse_key(input).map(Appkey::new)
    }
}

secret_newtype!(
    /// A 3D liveness session token, tied to one appkey.
    SessionToken
);
secret_newtype!(
    /// The operator credential returned by `/credencial`: the whole body,
    /// which `/appkey` takes back verbatim.
    CredentialToken
);
secret_newtype!(
    /// An operator password.
    Password
);
secret_newtype!(
    @without_new
    /// The bearer token of the channel admin API. `expose` is for the one
    /// place that must send it (the CLI).
    AdminToken
);

impl AdminToken {
    /// Wraps a token, trimmed: the bearer credentials it is compared with
    /// are trimmed too, so a token file with a stray space or a CRLF still
    /// admits its token. `None` when it is empty or blank, which would let
    /// a bare `Bearer ` header in.
    pub fn new(token: impl Into<String>) -> Option<Self> {
        let token = zeroize::Zeroizing::new(token.into());
        let token = token.trim();
        (!token.is_empty()).then(|| Self(token.to_owned().into()))
    }
}

secret_newtype!(
    @without_new
    /// A caller's bearer token (a JWT) for the public API. `expose` is for
    /// the one place that must send it (the CLI).
    CallerToken
);

impl CallerToken {
    /// Wraps a token, trimmed; `None` when it is empty or blank.
    pub fn new(token: impl Into<String>) -> Option<Self> {
        let token = token.into();
        let trimmed = token.trim();
        (!trimmed.is_empty()).then(|| Self(trimmed.to_owned().into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_of_a_secret_prints_no_value() {
        let key = Appkey::new("canary-appkey-123");
        assert_eq!(format!("{key:?}"), "Appkey(<redacted>)");
        assert_eq!(key.expose(), "canary-appkey-123");
    }

    #[test]
    fn secrets_match_only_when_equal() {
        assert!(secrets_match("s3cret", "s3cret"));
        assert!(!secrets_match("s3cret", "s3cre"));
        assert!(!secrets_match("s3cret", "S3cret"));
        assert!(secrets_match(b"a:b".as_slice(), "a:b"));
        assert!(secrets_match("", ""));
    }

    #[test]
    fn authorization_credentials_follow_the_scheme_case_insensitively() {
        assert_eq!(
            authorization_credentials("Bearer abc", "bearer"),
            Some("abc")
        );
        assert_eq!(
            authorization_credentials(" bAsIc  abc ", "Basic"),
            Some("abc")
        );
        assert_eq!(authorization_credentials("Basic abc", "bearer"), None);
        assert_eq!(authorization_credentials("Bearer", "bearer"), None);
        assert_eq!(authorization_credentials("Bearer ", "bearer"), None);
        assert_eq!(authorization_credentials("", "bearer"), None);
    }
}
