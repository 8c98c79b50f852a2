//! The sampler `OTEL_TRACES_SAMPLER` and `OTEL_TRACES_SAMPLER_ARG` name,
//! read from the gateway's `OTEL_*` source (`OtelEnv`) rather than the
//! process's environment, with the specification's names and default.

use opentelemetry_sdk::trace::Sampler;

/// The sampler `env` names; `parentbased_always_on` when it names none or
/// one this SDK does not have (with a warning), and a ratio of 1.0 when a
/// ratio sampler's argument is missing or not a number in [0, 1].
pub fn sampler_from_env(env: &dyn Fn(&str) -> Option<String>) -> Sampler {
    let parent_based = |root: Sampler| Sampler::ParentBased(Box::new(root));
    let ratio = || {
        let arg = env("OTEL_TRACES_SAMPLER_ARG");
        match arg.as_deref().map(str::trim).map(str::parse::<f64>) {
            Some(Ok(r)) if (0.0..=1.0).contains(&r) => r,
            _ => {
                tracing::warn!(
                    "OTEL_TRACES_SAMPLER_ARG is missing or not a ratio between 0 and 1; sampling every trace"
                );
                1.0
            }
        }
    };
    let Some(name) = env("OTEL_TRACES_SAMPLER") else {
        return parent_based(Sampler::AlwaysOn);
    };
    match name.trim() {
        "always_on" => Sampler::AlwaysOn,
        "always_off" => Sampler::AlwaysOff,
        "traceidratio" => Sampler::TraceIdRatioBased(ratio()),
        "parentbased_always_on" => parent_based(Sampler::AlwaysOn),
        "parentbased_always_off" => parent_based(Sampler::AlwaysOff),
        "parentbased_traceidratio" => parent_based(Sampler::TraceIdRatioBased(ratio())),
        other => {
            tracing::warn!(
                sampler = other,
                "OTEL_TRACES_SAMPLER names a sampler this gateway does not have; using parentbased_always_on"
            );
            parent_based(Sampler::AlwaysOn)
        }
    }
}
