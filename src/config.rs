//! Typed configuration: a TOML file, then `IDGATE_*` environment overrides.
//!
//! Overrides name a key path with `__` between segments and numbers for
//! array items: `IDGATE_UPSTREAM__BASE_URL`, `IDGATE_CHANNELS__1__PRIORITY`.
//! Values parse as TOML scalars when they can (`10000`, `true`) and are
//! strings otherwise; a value wrapped in double quotes is always a string.
//! The gateway's secrets are never read from the TOML itself: a profile
//! names the environment variable or file that holds its password. Load
//! errors name keys, lines and columns, never the text or the value.

use std::{net::SocketAddr, path::PathBuf, time::Duration};

use serde::Deserialize;

use crate::{
    channels::{AdminConfig, ChannelSpec, EmbeddedChannelsConfig, RoutingConfig},
    domain::Password,
};

/// Prefix of environment overrides.
pub const ENV_PREFIX: &str = "IDGATE_";

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

/// The whole configuration.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Listen addresses.
    pub listen: ListenConfig,
    /// The upstream REST service; absent: the sandbox is started in process.
    pub upstream: Option<UpstreamConfig>,
    /// Operator profiles whose credentials create appkeys.
    pub operators: Vec<OperatorConfig>,
    /// Limits on what callers send.
    pub limits: LimitsConfig,
    /// Traces, logs and metrics.
    pub telemetry: TelemetryConfig,
    /// 3D liveness vendor channels (`[[channels]]`).
    pub channels: Vec<ChannelSpec>,
    /// How new 3D sessions are routed (`[routing]`).
    pub routing: RoutingConfig,
    /// Timeout and breaker of the embedded sandbox's channels, used when
    /// no `[upstream]` and no `[[channels]]` are configured
    /// (`[embedded_channels]`).
    pub embedded_channels: EmbeddedChannelsConfig,
    /// Where the admin bearer token comes from (`[admin]`).
    pub admin: AdminConfig,
    /// The completion-notice receiver.
    pub webhook: crate::events::WebhookConfig,
    /// `WatchJourney` streams and their result reads.
    pub watch: crate::events::WatchConfig,
    /// The sandbox: started in process when no `[upstream]` is configured,
    /// and by `idgate sandbox`.
    pub sandbox: crate::sandbox::SandboxConfig,
}

/// Where the gateway listens.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ListenConfig {
    /// Public gRPC API, health and reflection.
    pub grpc: SocketAddr,
    /// Webhook receiver, `GET /metrics`, `GET /healthz`.
    pub http: SocketAddr,
    /// `ChannelAdminService`, behind a bearer token.
    pub admin: SocketAddr,
}

impl Default for ListenConfig {
    fn default() -> Self {
        Self {
            grpc: ([127, 0, 0, 1], 50051).into(),
            http: ([127, 0, 0, 1], 8080).into(),
            admin: ([127, 0, 0, 1], 50052).into(),
        }
    }
}

/// The upstream REST service.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct UpstreamConfig {
    /// `{base_url}`: host plus service root path.
    pub base_url: String,
    /// `{result_base_url}`: the result operation's own address.
    pub result_base_url: String,
    /// Timeout of one upstream call, in milliseconds.
    pub timeout_ms: u64,
    /// Timeout of establishing a connection, in milliseconds.
    pub connect_timeout_ms: u64,
    /// Largest upstream response body read, in bytes (the result carries
    /// every photo of the journey, so this is generous).
    pub max_response_bytes: usize,
    /// Validity of an appkey, for the `expire_time` the gateway reports.
    pub appkey_ttl_secs: u64,
    /// Validity of a credential token when `/credencial` gives no expiry.
    pub credential_ttl_secs: u64,
    /// Attempts of an operation that consumes nothing (credential,
    /// challenge, session token, result), within the caller's deadline.
    pub safe_attempts: u32,
    /// Idle pooled connections kept per host.
    pub pool_max_idle_per_host: usize,
    /// Operation paths, relative to the base URLs.
    pub paths: PathsConfig,
    /// Form and JSON field names that the spec does not show.
    pub fields: FieldsConfig,
}

impl Default for UpstreamConfig {
    fn default() -> Self {
        Self {
            base_url: String::new(),
            result_base_url: String::new(),
            timeout_ms: 10_000,
            connect_timeout_ms: 2_000,
            max_response_bytes: 32 * 1024 * 1024,
            appkey_ttl_secs: 300,
            credential_ttl_secs: 3 * 3600,
            safe_attempts: 2,
            pool_max_idle_per_host: 32,
            paths: PathsConfig::default(),
            fields: FieldsConfig::default(),
        }
    }
}

impl UpstreamConfig {
    /// The per-call timeout.
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms)
    }

    /// The connect timeout.
    pub fn connect_timeout(&self) -> Duration {
        Duration::from_millis(self.connect_timeout_ms)
    }
}

/// Operation paths (DESIGN.md wire contract defaults).
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PathsConfig {
    /// `/credencial`.
    pub credential: String,
    /// `/appkey`.
    pub appkey: String,
    /// `/challenge`.
    pub challenge: String,
    /// `/captcha` (2D submit).
    pub captcha: String,
    /// `/3d/session-token`, for the default channel.
    pub session_token_3d: String,
    /// `/3d/liveness`, for the default channel.
    pub liveness_3d: String,
    /// `/document` (images and digital licence).
    pub document: String,
    /// `/document/result`, relative to `result_base_url`.
    pub result: String,
}

impl Default for PathsConfig {
    fn default() -> Self {
        Self {
            credential: "/service/captcha/credencial".into(),
            appkey: "/service/captcha/appkey".into(),
            challenge: "/service/captcha/challenge".into(),
            captcha: "/service/captcha/captcha".into(),
            session_token_3d: "/service/captcha/3d/session-token".into(),
            liveness_3d: "/service/captcha/3d/liveness".into(),
            document: "/service/captcha/document".into(),
            result: "/service/captcha/document/result".into(),
        }
    }
}

/// Field names of the requests whose shape the spec does not show.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FieldsConfig {
    /// `/credencial` form: the login.
    pub credential_user: String,
    /// `/credencial` form: the password.
    pub credential_password: String,
    /// `/captcha` form: the challenge key.
    pub captcha_challenge_key: String,
    /// `/captcha` form: the concatenated snapshots.
    pub captcha_images: String,
    /// `/document` JSON: the image list.
    pub document_images: String,
    /// `/document` JSON: the digital licence.
    pub document_qrcode: String,
}

impl Default for FieldsConfig {
    fn default() -> Self {
        Self {
            credential_user: "user".into(),
            credential_password: "pass".into(),
            captcha_challenge_key: "chkey".into(),
            captcha_images: "images".into(),
            document_images: "images".into(),
            document_qrcode: "qrcode".into(),
        }
    }
}

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

/// Reads a secret from an environment variable or a file, whichever is
/// named (the variable first).
pub fn read_secret(
    what: &str,
    env: Option<&str>,
    file: Option<&std::path::Path>,
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

/// Limits on what callers send.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LimitsConfig {
    /// Largest image or PDF accepted, in bytes.
    pub max_image_bytes: usize,
    /// Most images in one request.
    pub max_images: usize,
    /// Largest gRPC message accepted, in bytes.
    pub max_grpc_message_bytes: usize,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        Self {
            max_image_bytes: 8 * 1024 * 1024,
            max_images: 16,
            max_grpc_message_bytes: 64 * 1024 * 1024,
        }
    }
}

/// Traces, logs and metrics. Where spans go is not configured here: the
/// standard `OTEL_EXPORTER_OTLP_*` variables say it, so the gateway behaves
/// like every other OpenTelemetry-instrumented process of a deployment.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TelemetryConfig {
    /// `service.name` of the exported spans; `OTEL_SERVICE_NAME` (or
    /// `service.name` in `OTEL_RESOURCE_ATTRIBUTES`) wins over it.
    pub service_name: String,
    /// Puts the caller's customer reference (`idExternoCliente`) on spans as
    /// `idgate.customer_reference`. Off by default: it is the caller's own
    /// identifier of the end user, which some callers treat as personal data.
    pub record_customer_reference: bool,
}

impl Default for TelemetryConfig {
    fn default() -> Self {
        Self {
            service_name: "idgate".to_owned(),
            record_customer_reference: false,
        }
    }
}

impl Config {
    /// Loads the file (if any), then applies `IDGATE_*` overrides from the
    /// process environment.
    pub fn load(path: Option<&std::path::Path>) -> Result<Self, ConfigError> {
        let text = match path {
            Some(p) => std::fs::read_to_string(p).map_err(|source| ConfigError::Read {
                path: p.to_owned(),
                source,
            })?,
            None => String::new(),
        };
        Self::from_toml_and_env(&text, std::env::vars())
    }

    /// Parses `text`, then applies the overrides found in `env`.
    pub fn from_toml_and_env(
        text: &str,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Self, ConfigError> {
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
        let config =
            Config::deserialize(toml::Value::Table(table)).map_err(|e| invalid(&e, None))?;
        config.validate()?;
        Ok(config)
    }

    /// Checks what types alone cannot: channel names unique and well
    /// formed, a routing mode that names a configured channel.
    pub fn validate(&self) -> Result<(), ConfigError> {
        crate::channels::config::validate(&self.channels, &self.routing)
            .and_then(|()| self.embedded_channels.validate())
            .map_err(|e| ConfigError::Invalid(e.to_string()))
    }
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
/// field and variant errors quote keys, which a reader needs.
fn value_free(message: &str) -> String {
    let names_keys = [
        "unknown field",
        "missing field",
        "duplicate field",
        "unknown variant",
    ]
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
fn scalar(value: &str) -> toml::Value {
    if let Some(inner) = value.strip_prefix('"').and_then(|v| v.strip_suffix('"')) {
        return toml::Value::String(inner.to_owned());
    }
    if let Ok(i) = value.parse::<i64>() {
        return toml::Value::Integer(i);
    }
    if let Ok(b) = value.parse::<bool>() {
        return toml::Value::Boolean(b);
    }
    if let Ok(f) = value.parse::<f64>() {
        return toml::Value::Float(f);
    }
    toml::Value::String(value.to_owned())
}

fn apply_override(table: &mut toml::Table, path: &[String], value: &str) -> Result<(), String> {
    let (first, rest) = path.split_first().ok_or("empty key")?;
    if rest.is_empty() {
        table.insert(first.clone(), scalar(value));
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
            while items.len() <= i {
                items.push(toml::Value::Table(toml::Table::new()));
            }
            if rest.is_empty() {
                items[i] = scalar(value);
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
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn defaults_apply_without_a_file() {
        let c = Config::from_toml_and_env("", env(&[])).unwrap();
        assert_eq!(c.listen.grpc.port(), 50051);
        assert!(c.upstream.is_none());
    }

    #[test]
    fn environment_overrides_nested_keys_and_array_items() {
        let c = Config::from_toml_and_env(
            "[upstream]\nbase_url = \"http://a\"\n[[operators]]\nname = \"x\"\nlogin = \"l\"\n",
            env(&[
                ("IDGATE_UPSTREAM__TIMEOUT_MS", "1234"),
                ("IDGATE_OPERATORS__0__LOGIN", "other"),
                ("IDGATE_ADMIN_TOKEN", "not-an-override"),
            ]),
        )
        .unwrap();
        let up = c.upstream.unwrap();
        assert_eq!(up.timeout_ms, 1234);
        assert_eq!(up.base_url, "http://a");
        assert_eq!(up.paths.credential, "/service/captcha/credencial");
        assert_eq!(c.operators[0].login, "other");
    }

    #[test]
    fn channels_routing_and_admin_load_with_overrides() {
        let c = Config::from_toml_and_env(
            "[routing]\nmode = \"force_alternative\"\n\
             [[channels]]\nname = \"primary\"\nbase_url = \"http://a\"\n\
             [[channels]]\nname = \"alternative\"\nbase_url = \"http://b\"\npriority = 1\n",
            env(&[
                ("IDGATE_CHANNELS__1__TIMEOUT_MS", "2500"),
                ("IDGATE_ADMIN__TOKEN_ENV", "MY_ADMIN_TOKEN"),
            ]),
        )
        .unwrap();
        assert_eq!(c.channels.len(), 2);
        assert_eq!(c.channels[1].timeout_ms, 2500);
        assert_eq!(
            c.routing.mode,
            crate::channels::RoutingMode::ForceAlternative
        );
        assert_eq!(c.admin.token_env, "MY_ADMIN_TOKEN");
    }

    #[test]
    fn duplicate_channel_names_fail_to_load() {
        let err = Config::from_toml_and_env(
            "[[channels]]\nname = \"p\"\nbase_url = \"http://a\"\n\
             [[channels]]\nname = \"p\"\nbase_url = \"http://b\"\n",
            env(&[]),
        )
        .unwrap_err();
        assert!(err.to_string().contains("another channel"), "{err}");
    }

    #[test]
    fn webhook_and_watch_sections_parse_and_take_overrides() {
        let c = Config::from_toml_and_env(
            "[webhook]\nbasic_user = \"vendor\"\nbasic_password_env = \"X\"\n[watch]\nwebhook_grace_secs = 5\n",
            env(&[("IDGATE_WEBHOOK__MAX_BODY_BYTES", "1024")]),
        )
        .unwrap();
        assert_eq!(c.webhook.basic_user.as_deref(), Some("vendor"));
        assert_eq!(c.webhook.max_body_bytes, 1024);
        assert_eq!(c.webhook.path, "/webhooks/journey");
        assert_eq!(c.watch.webhook_grace_secs, 5);
        assert_eq!(c.watch.poll_max_ms, 10_000);
    }

    #[test]
    fn unknown_keys_are_rejected_by_name() {
        let err = Config::from_toml_and_env("[listen]\ngrcp = \"x\"\n", env(&[])).unwrap_err();
        assert!(err.to_string().contains("grcp"), "{err}");
    }

    #[test]
    fn a_missing_password_variable_names_the_profile_not_a_value() {
        let op = OperatorConfig {
            name: "default".into(),
            login: "op".into(),
            password_env: Some("IDGATE_TEST_SURELY_UNSET_VAR".into()),
            password_file: None,
        };
        let err = op.resolve().unwrap_err().to_string();
        assert!(err.contains("operators.default"), "{err}");
    }

    #[test]
    fn the_readme_configuration_example_loads() {
        let readme = include_str!("../README.md");
        let section = readme
            .split("\n## Configuration\n")
            .nth(1)
            .expect("README has a Configuration section");
        let toml = section
            .split("```toml\n")
            .nth(1)
            .and_then(|s| s.split("```").next())
            .expect("the section has a TOML example");
        let c = Config::from_toml_and_env(toml, env(&[])).expect("the README example loads");
        assert_eq!(c.channels.len(), 2);
        assert!(c.upstream.is_some());
        assert_eq!(c.operators.len(), 1);
    }

    #[test]
    fn errors_never_quote_the_configuration_text_or_a_value() {
        // A syntax error on a line holding a secret.
        let err = Config::from_toml_and_env(
            "[sandbox]\nwebhook = { signing_secret = \"whsec_TOPSECRET\" \n",
            env(&[]),
        )
        .unwrap_err()
        .to_string();
        assert!(!err.contains("TOPSECRET"), "{err}");
        assert!(err.contains("line 2"), "{err}");
        // A numeric override of a string key fails without quoting it...
        let err = Config::from_toml_and_env("", env(&[("IDGATE_UPSTREAM__BASE_URL", "987654321")]))
            .unwrap_err()
            .to_string();
        assert!(!err.contains("987654321"), "{err}");
        // ...and quoting the override makes it a string.
        let c =
            Config::from_toml_and_env("", env(&[("IDGATE_UPSTREAM__BASE_URL", "\"987654321\"")]))
                .unwrap();
        assert_eq!(c.upstream.unwrap().base_url, "987654321");
    }
}
