//! `[[operators]]`: the operator profiles whose credentials create
//! appkeys. A profile names where its password is; the password itself is
//! never in the TOML.

use std::path::PathBuf;

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
