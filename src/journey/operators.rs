//! `[[operators]]`: the operator profiles whose credentials create
//! appkeys. A profile names where its password is; the password itself is
//! never in the TOML.

use std::{path::PathBuf, sync::Arc};

use serde::Deserialize;

use crate::{
    config_source::{ConfigError, read_secret},
    domain::Password,
};

/// An operator profile as configured: the password lives elsewhere.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OperatorConfig {
    /// Profile name callers select in `CreateJourney.operator_profile`.
    pub name: String,
    /// Operator login (`user`).
    pub login: String,
    /// Environment variable holding the password.
    #[serde(default)]
    pub password_env: Option<String>,
    /// File holding the password (trailing newline ignored).
    #[serde(default)]
    pub password_file: Option<PathBuf>,
}

/// An operator profile with its password resolved.
#[derive(Debug, Clone)]
pub struct OperatorProfile {
    /// Profile name.
    pub name: String,
    /// Operator login.
    pub login: String,
    /// Operator password.
    pub password: Password,
}

impl OperatorConfig {
    /// Reads the password from the environment or the file.
    pub fn resolve(&self) -> Result<OperatorProfile, ConfigError> {
        let what = format!("operators.{}", self.name);
        let password = read_secret(
            &what,
            self.password_env.as_deref(),
            self.password_file.as_deref(),
        )?;
        Ok(OperatorProfile {
            name: self.name.clone(),
            login: self.login.clone(),
            password: Password::new(password),
        })
    }
}

/// The operator profiles in configuration order. The first is the
/// default: a request that names no profile uses it. The one place that
/// default is resolved, for creation, billing and credentials alike.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OperatorProfiles {
    names: Arc<[String]>,
}

impl OperatorProfiles {
    /// The profiles `names`, in configuration order (duplicates are
    /// kept once, where they first appear).
    pub fn new(names: impl IntoIterator<Item = String>) -> Self {
        let mut kept: Vec<String> = Vec::new();
        for name in names {
            if !kept.contains(&name) {
                kept.push(name);
            }
        }
        Self { names: kept.into() }
    }

    /// The default profile: the first configured.
    pub fn default_profile(&self) -> Option<&str> {
        self.names.first().map(String::as_str)
    }

    /// The profile `requested` means: itself when named, else (`None` or
    /// empty) the default; `None` only when no profile is configured.
    pub fn meant<'a>(&'a self, requested: Option<&'a str>) -> Option<&'a str> {
        requested
            .filter(|name| !name.is_empty())
            .or_else(|| self.default_profile())
    }

    /// Whether `name` is a configured profile.
    pub fn knows(&self, name: &str) -> bool {
        self.names.iter().any(|known| known == name)
    }

    /// The configured names, in order.
    pub fn names(&self) -> &[String] {
        &self.names
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_that_names_no_profile_means_the_first_configured() {
        let profiles = OperatorProfiles::new(["a".to_owned(), "b".to_owned(), "a".to_owned()]);
        assert_eq!(profiles.names(), ["a", "b"]);
        assert_eq!(profiles.meant(None), Some("a"));
        assert_eq!(profiles.meant(Some("")), Some("a"));
        assert_eq!(profiles.meant(Some("b")), Some("b"));
        assert_eq!(profiles.meant(Some("x")), Some("x"));
        assert!(profiles.knows("b") && !profiles.knows("x"));
        assert_eq!(OperatorProfiles::default().meant(None), None);
    }
}
