//! The guarded rollout and the conformance probe, wired to the gateway:
//! the rollout's record in the shared state (the fleet's on Redis) and, in
//! a fleet, the driver's lease; the loop every replica runs; and the
//! probe's appkeys from the journey core.

use std::sync::Arc;

use crate::{
    Error,
    channels::{
        ChannelRouter,
        probe::{ProbeAppkeys, ProbeConfig, ProbePerson, ProbeVerdicts, Prober},
        rollout::Rollouts,
    },
    cluster::{BoxFuture, Shared},
    config::Config,
    context::CallContext,
    domain::{Appkey, BirthDate, Cpf, CustomerReference, EndUser, PersonName},
    journey::JourneyCore,
    sandbox::samples,
    telemetry::Metrics,
};

/// Longest wait for the probe's appkey.
const PROBE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Customer reference of the probe's appkeys: tells them apart upstream.
const PROBE_REFERENCE: &str = "IDGATEPROBE";

/// The probe's appkeys, created through the journey core (the operator
/// credentials of `CreateJourney`).
struct CoreAppkeys(JourneyCore);

/// The end user of a probe person (checked at start by
/// `ProbeConfig::validate`, so a failure here is the gateway's own).
fn person(p: &ProbePerson) -> Result<EndUser, Error> {
    // The values never reach the error: they are personal data.
    let bad = |_| Error::Internal("a [probe] person is not valid".to_owned());
    Ok(EndUser {
        cpf: Cpf::parse(&p.cpf).map_err(bad)?,
        name: PersonName::parse(&p.name).map_err(bad)?,
        birth_date: BirthDate::parse_now(&p.birth_date).map_err(bad)?,
        customer_reference: CustomerReference::parse(PROBE_REFERENCE).map_err(bad)?,
    })
}

impl ProbeAppkeys for CoreAppkeys {
    fn appkey(&self, p: &ProbePerson, profile: &str) -> BoxFuture<Result<Appkey, Error>> {
        let core = self.0.clone();
        let user = person(p);
        let profile = profile.to_owned();
        Box::pin(async move {
            let journey = core
                .create_journey(&CallContext::with_timeout(PROBE_TIMEOUT), &user?, &profile)
                .await?;
            Ok(journey.appkey)
        })
    }
}

/// `[probe]`, and on the embedded sandbox (no `[upstream]`) without
/// persons of its own, the sandbox's positive test persons: the channels
/// runbook then works on the README's first command with no
/// configuration. A real upstream's test persons are the vendor's, and
/// only the operator can name them.
fn probe_config(config: &Config) -> ProbeConfig {
    let mut probe = config.probe.clone();
    if probe.persons.is_empty() && config.upstream.is_none() {
        probe.persons = samples::REGISTRY_POSITIVE
            .iter()
            .map(|p| {
                // The sandbox writes dd/mm/yyyy; CreateJourney takes ISO.
                let mut parts = p.birth_date.split('/');
                let (d, m, y) = (parts.next(), parts.next(), parts.next());
                ProbePerson {
                    cpf: p.cpf.to_owned(),
                    name: p.name.to_owned(),
                    birth_date: format!(
                        "{}-{}-{}",
                        y.unwrap_or_default(),
                        m.unwrap_or_default(),
                        d.unwrap_or_default()
                    ),
                }
            })
            .collect();
    }
    probe
}

/// The rollout service and the prober of `router`.
pub(super) fn services(
    config: &Config,
    router: &Arc<ChannelRouter>,
    core: &JourneyCore,
    shared: &Shared,
    metrics: &Metrics,
) -> (Arc<Rollouts>, Option<Arc<Prober>>) {
    let mut rollouts = Rollouts::new(
        router.clone(),
        shared.rollout.clone(),
        config.rollout.clone(),
        Arc::new(ProbeVerdicts::new(shared.probes.clone())),
    )
    .with_metrics(metrics.clone());
    if let Some(fleet) = &shared.fleet {
        rollouts = rollouts.with_lease(fleet.driver_lease().clone());
    }
    let prober = Prober::new(
        router.clone(),
        Arc::new(CoreAppkeys(core.clone())),
        probe_config(config),
    );
    (Arc::new(rollouts), prober.map(Arc::new))
}
