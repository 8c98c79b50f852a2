//! Bearer secrets: appkeys, session tokens, credential tokens, passwords.

use secrecy::{ExposeSecret, SecretString};

macro_rules! secret_newtype {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone)]
        pub struct $name(SecretString);

        impl $name {
            /// Wraps a secret value.
            pub fn new(value: impl Into<String>) -> Self {
                Self(SecretString::from(value.into()))
            }

            /// The secret itself, for the one place that must send it.
            pub fn expose(&self) -> &str {
                self.0.expose_secret()
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
}

secret_newtype!(
    /// The access key of one journey, issued by `/appkey`. Whoever holds it
    /// can act on the journey and read its result.
    Appkey
);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_of_a_secret_prints_no_value() {
        let key = Appkey::new("canary-appkey-123");
        assert_eq!(format!("{key:?}"), "Appkey(<redacted>)");
        assert_eq!(key.expose(), "canary-appkey-123");
    }
}
