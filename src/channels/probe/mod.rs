//! The conformance probe of a channel (`ProbeChannel`, `idgate channels
//! probe`): synthetic calls that consume nothing, each answer checked
//! against the REST contract ([`contract`]), and the last verdict of each
//! channel ([`ProbeVerdicts`]): a channel that failed its last probe gets
//! no weight (`SetRoutingMode`, `StartRollout`) unless the request forces
//! it.
//!
//! A probe creates an appkey for one of the probe persons of `[probe]`
//! (through the core service, like `CreateJourney`) and asks the channel
//! for a session token: neither consumes the appkey. Only with `consume`
//! does it also send `/3d/liveness`, which finishes the appkey (and may
//! be billed). The persons are personal data: never logged, never in a
//! report; the appkey and the token neither.

pub mod contract;

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use serde::Deserialize;

use self::contract::{Operation3D, ProbeCheck, check};
use super::{ChannelRouter, ChannelSpec};
use crate::{
    Error,
    cluster::{BoxFuture, ProbeStore},
    domain::Appkey,
};

/// The last probe verdict of each channel, kept in the fleet's shared
/// state (`cluster::ProbeStore`): a probe on one replica refuses weight
/// on every replica.
pub struct ProbeVerdicts {
    store: Arc<dyn ProbeStore>,
}

impl std::fmt::Debug for ProbeVerdicts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProbeVerdicts").finish_non_exhaustive()
    }
}

impl ProbeVerdicts {
    /// Verdicts kept in `store`.
    pub fn new(store: Arc<dyn ProbeStore>) -> Self {
        Self { store }
    }

    /// Notes the verdict of a probe of `channel` for the fleet.
    pub async fn record(&self, channel: &str, conforming: bool) -> Result<(), Error> {
        self.store
            .set_verdict(channel, conforming)
            .await
            .map_err(|_| Error::ClusterUnavailable)
    }

    /// False when the last probe of `channel` found it non-conforming;
    /// true when it passed or was never probed.
    pub async fn may_take_weight(&self, channel: &str) -> Result<bool, Error> {
        let verdict = self
            .store
            .verdict(channel)
            .await
            .map_err(|_| Error::ClusterUnavailable)?;
        Ok(verdict.unwrap_or(true))
    }
}

/// A probe person of `[probe]`. Not `Debug`: personal data.
#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProbePerson {
    /// CPF, with valid check digits.
    pub cpf: String,
    /// Name and surname.
    pub name: String,
    /// Birth date, as `CreateJourney` takes it.
    pub birth_date: String,
}

/// `[probe]`: whom the probe creates its appkeys for.
#[derive(Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProbeConfig {
    /// Probe persons, used in turn; none: `ProbeChannel` is refused.
    pub persons: Vec<ProbePerson>,
    /// Operator profile of the probe's appkeys; empty: the first one.
    pub operator_profile: String,
}

impl std::fmt::Debug for ProbeConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProbeConfig")
            .field("persons", &self.persons.len())
            .field("operator_profile", &self.operator_profile)
            .finish()
    }
}

/// Most probe persons.
pub const MAX_PROBE_PERSONS: usize = 16;

impl ProbeConfig {
    /// Refuses a person whose CPF, name or birth date `CreateJourney`
    /// would refuse, naming its index and field, never its value; and
    /// more than [`MAX_PROBE_PERSONS`].
    pub fn validate(&self) -> Result<(), String> {
        use crate::domain::{BirthDate, Cpf, PersonName};
        if self.persons.len() > MAX_PROBE_PERSONS {
            return Err(format!("probe.persons: at most {MAX_PROBE_PERSONS}"));
        }
        for (i, p) in self.persons.iter().enumerate() {
            let field = if Cpf::parse(&p.cpf).is_err() {
                "cpf"
            } else if PersonName::parse(&p.name).is_err() {
                "name"
            } else if BirthDate::parse_now(&p.birth_date).is_err() {
                "birth_date"
            } else {
                continue;
            };
            return Err(format!("probe.persons[{i}].{field} is not valid"));
        }
        Ok(())
    }
}

/// Where the probe gets an appkey for a probe person: the core service.
pub trait ProbeAppkeys: Send + Sync + 'static {
    /// A fresh appkey for `person` with the credentials of `profile`.
    fn appkey(&self, person: &ProbePerson, profile: &str) -> BoxFuture<Result<Appkey, Error>>;
}

/// What a probe found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeReport {
    /// Every check, in the order run.
    pub checks: Vec<ProbeCheck>,
}

impl ProbeReport {
    /// True when every check passed.
    pub fn conforming(&self) -> bool {
        self.checks.iter().all(ProbeCheck::passed)
    }
}

/// Largest answer body a probe reads: far above any answer of the
/// contract.
const MAX_PROBE_BODY: usize = 64 * 1024;

/// Runs probes of the channels of a router.
pub struct Prober {
    router: Arc<ChannelRouter>,
    appkeys: Arc<dyn ProbeAppkeys>,
    config: ProbeConfig,
    next: AtomicUsize,
    http: reqwest::Client,
}

impl std::fmt::Debug for Prober {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prober")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Prober {
    /// A prober of `router`'s channels, with appkeys from `appkeys`;
    /// `None` without probe persons.
    pub fn new(
        router: Arc<ChannelRouter>,
        appkeys: Arc<dyn ProbeAppkeys>,
        config: ProbeConfig,
    ) -> Option<Self> {
        if config.persons.is_empty() {
            return None;
        }
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder().build().ok()?;
        Some(Self {
            router,
            appkeys,
            config,
            next: AtomicUsize::new(0),
            http,
        })
    }

    /// Probes channel `name`; with `consume`, also its `/3d/liveness`.
    pub async fn probe(&self, name: &str, consume: bool) -> Result<ProbeReport, Error> {
        let spec = self
            .router
            .channel_spec(name)
            .ok_or_else(|| Error::ChannelUnknown(name.to_owned()))?;
        let at = self.next.fetch_add(1, Ordering::Relaxed) % self.config.persons.len();
        let person = &self.config.persons[at];
        let appkey = self
            .appkeys
            .appkey(person, &self.config.operator_profile)
            .await?;
        let timeout = Duration::from_millis(spec.timeout_ms);
        let session_body = serde_json::json!({
            "appkey": appkey.expose(),
            "userAgent": "idgate-probe",
        });
        let (session, token) = self
            .call(&spec, Operation3D::SessionToken, &session_body, timeout)
            .await;
        let mut checks = vec![session];
        if consume {
            match token {
                Some(token) if checks[0].passed() => {
                    let body = serde_json::json!({
                        "appkey": appkey.expose(),
                        "sessionToken": token,
                    });
                    checks.push(
                        self.call(&spec, Operation3D::Liveness, &body, timeout)
                            .await
                            .0,
                    );
                }
                _ => checks.push(ProbeCheck::no_answer(
                    Operation3D::Liveness,
                    Duration::ZERO,
                    "not sent: the session token check failed",
                )),
            }
        }
        let report = ProbeReport { checks };
        tracing::info!(
            channel = name,
            consume,
            conforming = report.conforming(),
            "3D channel probed"
        );
        Ok(report)
    }

    /// One call of `op` on `spec`: its check, and the session token when
    /// the answer carried one.
    async fn call(
        &self,
        spec: &ChannelSpec,
        op: Operation3D,
        body: &serde_json::Value,
        timeout: Duration,
    ) -> (ProbeCheck, Option<String>) {
        let path = match op {
            Operation3D::SessionToken => &spec.session_token_path,
            Operation3D::Liveness => &spec.liveness_path,
        };
        let url = format!("{}{}", spec.base_url.trim_end_matches('/'), path);
        let started = Instant::now();
        let sent = self
            .http
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(serde_json::to_vec(body).unwrap_or_default())
            .timeout(timeout)
            .send()
            .await;
        let mut response = match sent {
            Ok(r) => r,
            Err(e) => {
                let why = if e.is_timeout() {
                    "timed out"
                } else {
                    "connection failed"
                };
                return (ProbeCheck::no_answer(op, started.elapsed(), why), None);
            }
        };
        let status = response.status().as_u16();
        let mut bytes = Vec::new();
        loop {
            match response.chunk().await {
                Ok(Some(chunk)) if bytes.len() + chunk.len() <= MAX_PROBE_BODY => {
                    bytes.extend_from_slice(&chunk);
                }
                Ok(Some(_)) => {
                    let why = "the answer is larger than 64 KiB";
                    return (ProbeCheck::no_answer(op, started.elapsed(), why), None);
                }
                Ok(None) => break,
                Err(_) => {
                    let why = "the answer was cut short";
                    return (ProbeCheck::no_answer(op, started.elapsed(), why), None);
                }
            }
        }
        let elapsed = started.elapsed();
        let token = serde_json::from_slice::<serde_json::Value>(&bytes)
            .ok()
            .and_then(|v| {
                v.get("token")
                    .or_else(|| v.get("sessionToken"))
                    .and_then(|t| t.as_str().map(str::to_owned))
            });
        (check(op, status, &bytes, elapsed, timeout), token)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn person(cpf: &str, birth_date: &str) -> ProbePerson {
        ProbePerson {
            cpf: cpf.into(),
            name: "Ana Positiva Souza".into(),
            birth_date: birth_date.into(),
        }
    }

    #[test]
    fn a_probe_person_createjourney_would_refuse_is_refused_at_start_by_index_and_field() {
        let mut config = ProbeConfig::default();
        assert_eq!(config.validate(), Ok(()));
        config.persons = vec![person("52110000139", "1985-03-14")];
        assert_eq!(config.validate(), Ok(()));
        config.persons.push(person("52110000138", "1985-03-14"));
        assert_eq!(
            config.validate(),
            Err("probe.persons[1].cpf is not valid".to_owned())
        );
        config.persons[1] = person("52110000139", "31/02/1985");
        assert_eq!(
            config.validate(),
            Err("probe.persons[1].birth_date is not valid".to_owned())
        );
    }

    #[tokio::test]
    async fn an_unprobed_channel_may_take_weight_and_the_last_probe_decides() {
        let verdicts = ProbeVerdicts::new(Arc::new(crate::cluster::MemoryProbes::default()));
        assert!(verdicts.may_take_weight("alternative").await.unwrap());
        verdicts.record("alternative", false).await.unwrap();
        assert!(!verdicts.may_take_weight("alternative").await.unwrap());
        verdicts.record("alternative", true).await.unwrap();
        assert!(verdicts.may_take_weight("alternative").await.unwrap());
    }
}
