//! Where configuration values come from, for every module's section: a
//! TOML text, then `IDGATE_*` environment overrides, and secrets read from
//! an environment variable or a file, never from the TOML itself.
//!
//! Overrides name a key path with `__` between segments and numbers for
//! array items: `IDGATE_UPSTREAM__BASE_URL`, `IDGATE_CHANNELS__1__PRIORITY`.
//! Values parse as TOML scalars when they can (`10000`, `true`) and are
//! strings otherwise; a value wrapped in double quotes is always a string.
//! Load errors name keys, lines and columns, never the text or a value.
//!
//! A leaf: each module defines its own section type and may use
//! [`ConfigError`] and [`read_secret`]; the `config` module composes them.

use std::path::{Path, PathBuf};

pub mod bounds;

use serde::de::DeserializeOwned;

/// Prefix of environment overrides.
pub const ENV_PREFIX: &str = "IDGATE_";

/// Overrides address array items `0` to `MAX_ARRAY_ITEMS - 1`.
pub const MAX_ARRAY_ITEMS: usize = 1024;

/// A configuration that cannot be loaded; messages name keys, never values.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read configuration file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The TOML is malformed or a key has the wrong type.
    #[error("invalid configuration: {0}")]
    Invalid(String),
    /// A secret named by the configuration is missing.
    #[error("secret for {what} not found: {why}")]
    MissingSecret {
        /// Which secret (a key path, never the value).
        what: String,
        /// Where it was looked for.
        why: String,
    },
}

/// Reads a secret from an environment variable or a file, whichever is
/// named (the variable first).
pub fn read_secret(
    what: &str,
    env: Option<&str>,
    file: Option<&Path>,
) -> Result<String, ConfigError> {
    if let Some(var) = env {
        return std::env::var(var).map_err(|_| ConfigError::MissingSecret {
            what: what.to_owned(),
            why: format!("environment variable {var} is not set"),
        });
    }
    if let Some(path) = file {
        let s = std::fs::read_to_string(path).map_err(|e| ConfigError::MissingSecret {
            what: what.to_owned(),
            why: format!("cannot read {}: {e}", path.display()),
        })?;
        return Ok(s.trim_end_matches(['\r', '\n']).to_owned());
    }
    Err(ConfigError::MissingSecret {
        what: what.to_owned(),
        why: "neither an environment variable nor a file is configured".to_owned(),
    })
}

/// Parses `text` as TOML, applies the `IDGATE_*` overrides found in `env`,
/// then deserializes the result as `T`.
pub fn from_toml_and_env<T: DeserializeOwned>(
    text: &str,
    env: impl IntoIterator<Item = (String, String)>,
) -> Result<T, ConfigError> {
    let mut table: toml::Table = toml::from_str(text).map_err(|e| invalid(&e, Some(text)))?;
    for (key, value) in env {
        let Some(rest) = key.strip_prefix(ENV_PREFIX) else {
            continue;
        };
        if !rest.contains("__") {
            // Single-segment IDGATE_* names are secrets and flags
            // (IDGATE_ADMIN_TOKEN, ...), not overrides.
            continue;
        }
        let path: Vec<String> = rest.split("__").map(|s| s.to_ascii_lowercase()).collect();
        apply_override(&mut table, &path, &value)
            .map_err(|e| ConfigError::Invalid(format!("{key}: {e}")))?;
    }
    T::deserialize(toml::Value::Table(table)).map_err(|e| invalid(&e, None))
}

/// A TOML or type error, told without the offending text: toml's
/// `Display` quotes the source line and serde's messages quote the value,
/// and either may be a secret (the sandbox's test operators keep their
/// passwords in `[sandbox]`).
fn invalid(e: &toml::de::Error, text: Option<&str>) -> ConfigError {
    let mut message = value_free(e.message());
    if let (Some(text), Some(span)) = (text, e.span()) {
        let before = &text[..span.start.min(text.len())];
        let line = before.matches('\n').count() + 1;
        let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
        message = format!("line {line}, column {column}: {message}");
    }
    ConfigError::Invalid(message)
}

/// `message` with quoted values replaced, unless it quotes names: serde's
/// field errors quote keys, which a reader needs. Its variant error
/// quotes the value written (`unknown variant `x`, expected one of ...`),
/// then the names a reader needs: the value is replaced, the names kept.
fn value_free(message: &str) -> String {
    const VARIANT: &str = "unknown variant `";
    if let Some(at) = message.find(VARIANT) {
        let start = at + VARIANT.len();
        // The last of serde's two endings: the value may hold a backtick.
        let end = message
            .rfind("`, expected ")
            .or_else(|| message.rfind("`, there are no variants"))
            .filter(|end| *end >= start)
            .unwrap_or(message.len());
        return format!("{}<redacted>{}", &message[..start], &message[end..]);
    }
    let names_keys = ["unknown field", "missing field", "duplicate field"]
        .iter()
        .any(|p| message.contains(p));
    if names_keys {
        return message.to_owned();
    }
    let mut out = String::with_capacity(message.len());
    let mut quote: Option<char> = None;
    for c in message.chars() {
        match quote {
            Some(q) if c == q => {
                out.push_str("<redacted>");
                out.push(c);
                quote = None;
            }
            Some(_) => {}
            None => {
                out.push(c);
                if c == '`' || c == '"' {
                    quote = Some(c);
                }
            }
        }
    }
    out
}

/// An override value: a number or boolean when it reads as one, else a
/// string; wrapped in double quotes, always a string (`"123456"` for a
/// numeric password).
///
/// An integer past TOML's range (a 64-bit signed integer) is refused here,
/// where the variable is known: read as a float it would fail later as a
/// type error that names no key.
fn scalar(value: &str) -> Result<toml::Value, String> {
    if let Some(inner) = value.strip_prefix('"').and_then(|v| v.strip_suffix('"')) {
        return Ok(toml::Value::String(inner.to_owned()));
    }
    if let Ok(i) = value.parse::<i64>() {
        return Ok(toml::Value::Integer(i));
    }
    let digits = value.strip_prefix(['-', '+']).unwrap_or(value);
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("an integer past {} is out of range", i64::MAX));
    }
    if let Ok(b) = value.parse::<bool>() {
        return Ok(toml::Value::Boolean(b));
    }
    if let Ok(f) = value.parse::<f64>() {
        return Ok(toml::Value::Float(f));
    }
    Ok(toml::Value::String(value.to_owned()))
}

fn apply_override(table: &mut toml::Table, path: &[String], value: &str) -> Result<(), String> {
    let (first, rest) = path.split_first().ok_or("empty key")?;
    if rest.is_empty() {
        table.insert(first.clone(), scalar(value)?);
        return Ok(());
    }
    let entry = table
        .entry(first.clone())
        .or_insert_with(|| toml::Value::Table(toml::Table::new()));
    apply_value(entry, rest, value)
}

fn apply_value(node: &mut toml::Value, path: &[String], value: &str) -> Result<(), String> {
    match node {
        toml::Value::Table(t) => apply_override(t, path, value),
        toml::Value::Array(items) => {
            let (index, rest) = path.split_first().ok_or("empty key")?;
            let i: usize = index
                .parse()
                .map_err(|_| format!("`{index}` is not an array index"))?;
            if i >= MAX_ARRAY_ITEMS {
                // Missing items are filled in below: an unbounded index
                // would fill memory.
                return Err(format!(
                    "array index `{index}` is over {}",
                    MAX_ARRAY_ITEMS - 1
                ));
            }
            while items.len() <= i {
                items.push(toml::Value::Table(toml::Table::new()));
            }
            if rest.is_empty() {
                items[i] = scalar(value)?;
                Ok(())
            } else {
                apply_value(&mut items[i], rest, value)
            }
        }
        _ => Err("overrides a key inside a value that is not a table".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::value_free;

    #[test]
    fn an_unknown_variant_names_the_variants_but_not_the_value_written() {
        assert_eq!(
            value_free("unknown variant `MARK+0A`, expected `standalone` or `cluster`"),
            "unknown variant `<redacted>`, expected `standalone` or `cluster`"
        );
        assert_eq!(
            value_free("unknown variant `a`, expected one`, expected `x`"),
            "unknown variant `<redacted>`, expected `x`"
        );
        assert_eq!(
            value_free("unknown variant `s3cr3t`, there are no variants"),
            "unknown variant `<redacted>`, there are no variants"
        );
        assert_eq!(
            value_free("unknown field `pasword`, expected `password`"),
            "unknown field `pasword`, expected `password`"
        );
        assert_eq!(
            value_free("invalid type: string \"s3cr3t\", expected u64"),
            "invalid type: string \"<redacted>\", expected u64"
        );
    }
}
