//! Where the standard `OTEL_*` variables are read from: the process's
//! environment in production, or a set given by an embedder. Tests give
//! one (often empty) so that a developer's shell exporting, say,
//! `OTEL_EXPORTER_OTLP_ENDPOINT` changes no in-process gateway: the
//! process's environment is shared by every test of the binary.

use std::collections::BTreeMap;

/// The source of the `OTEL_*` variables (and only those: `RUST_LOG` and
/// the configuration's `IDGATE_*` have their own paths).
#[derive(Debug, Clone, Default)]
pub enum OtelEnv {
    /// The process's environment, as every OpenTelemetry SDK reads it.
    #[default]
    Process,
    /// These variables; the process's are never read.
    Given(BTreeMap<String, String>),
}

impl OtelEnv {
    /// No variable set, whatever the process's environment holds.
    pub fn none() -> Self {
        Self::Given(BTreeMap::new())
    }

    /// Exactly these variables.
    pub fn given<K: Into<String>, V: Into<String>>(vars: impl IntoIterator<Item = (K, V)>) -> Self {
        Self::Given(
            vars.into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        )
    }

    /// The value of `name`, when set and not blank (the SDK's reading: a
    /// blank variable is an unset one).
    pub fn var(&self, name: &str) -> Option<String> {
        let value = match self {
            Self::Process => std::env::var(name).ok(),
            Self::Given(vars) => vars.get(name).cloned(),
        };
        value.filter(|v| !v.trim().is_empty())
    }

    /// True when the variables come from the process's environment.
    pub fn is_process(&self) -> bool {
        matches!(self, Self::Process)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_given_set_answers_only_its_own_non_blank_variables() {
        let env = OtelEnv::given([("OTEL_SERVICE_NAME", "svc"), ("OTEL_SDK_DISABLED", " ")]);
        assert_eq!(env.var("OTEL_SERVICE_NAME").as_deref(), Some("svc"));
        assert_eq!(env.var("OTEL_SDK_DISABLED"), None);
        // PATH is set in every test process; a given set never reads it.
        assert_eq!(OtelEnv::none().var("PATH"), None);
        assert!(OtelEnv::Process.var("PATH").is_some());
    }
}
