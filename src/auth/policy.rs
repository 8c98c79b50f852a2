//! The `[[callers]]` table: a verified identity to its [`Caller`], or to
//! nobody (`CALLER_UNKNOWN`). The table is swapped whole on SIGHUP; a
//! request keeps the `Arc<Caller>` it was given, and an open stream that
//! [subscribes](Policy::subscribe) re-checks its caller in the new table.

use std::{collections::HashMap, sync::Arc};

use tokio::sync::watch;

use super::{config::CallerConfig, mtls::MtlsIdentity};
use crate::{
    config_source::ConfigError,
    domain::{Caller, CallerLimits, CallerName, ProfileGrant},
};

/// A verified identity, before it is looked up.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Identity {
    /// A JWT's subject claim.
    JwtSubject(Arc<str>),
    /// A client certificate's identity.
    Mtls(MtlsIdentity),
}

/// The process-wide bounds a caller table divides into per-caller shares
/// (`[serving] max_body_bytes_in_flight`, `[journeys] max_entries`), and
/// the message limits a byte share must hold one message of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shares {
    /// Request bytes all calls may be receiving at once.
    pub body_bytes: usize,
    /// Live journey records the process holds.
    pub journeys: usize,
    /// The largest request message of an RPC without images.
    pub small_message: usize,
    /// The largest request message of a document RPC.
    pub document_message: usize,
}

impl Shares {
    /// No process-wide bound (unit tests).
    pub const UNBOUNDED: Shares = Shares {
        body_bytes: usize::MAX,
        journeys: usize::MAX,
        small_message: 0,
        document_message: 0,
    };
}

/// The callers by identity.
#[derive(Debug, Default)]
pub struct CallerTable {
    by_subject: HashMap<String, Arc<Caller>>,
    by_spiffe: HashMap<String, Arc<Caller>>,
    by_dns: HashMap<String, Arc<Caller>>,
}

impl CallerTable {
    /// Builds the table from validated `[[callers]]` entries (see
    /// [`validate_callers`](super::config::validate_callers)), dividing
    /// `shares` among them where an entry sets no share of its own; the
    /// errors name keys.
    pub fn build(callers: &[CallerConfig], shares: &Shares) -> Result<Self, ConfigError> {
        let mut table = Self::default();
        for (i, c) in callers.iter().enumerate() {
            let at = format!("callers[{i}]");
            let defaults = CallerLimits::default();
            let permissions: crate::domain::Permissions = c.permissions(&at)?.into_iter().collect();
            // A byte share must hold the largest message the caller may
            // send, or that call could never be served.
            let largest = match permissions.contains(crate::domain::Permission::Documents) {
                true => shares.document_message,
                false => shares.small_message,
            };
            let max_body_bytes = match c.max_body_bytes {
                Some(set) if set < largest => {
                    return Err(ConfigError::Invalid(format!(
                        "{at}.max_body_bytes must hold the largest request message the caller may send ({largest} bytes)"
                    )));
                }
                Some(set) => set,
                None => CallerLimits::default_share(shares.body_bytes, callers.len(), largest),
            };
            let caller = Arc::new(Caller {
                name: CallerName::new(c.name.as_str()),
                permissions,
                profiles: ProfileGrant::Only(c.operator_profiles.clone().into()),
                journeys: c.scope(&at)?,
                result_view: c.view(&at)?,
                limits: CallerLimits {
                    max_in_flight: c.max_in_flight.unwrap_or(defaults.max_in_flight),
                    max_watch_streams: c.max_watch_streams.unwrap_or(defaults.max_watch_streams),
                    max_body_bytes,
                    max_journeys: c.max_journeys.unwrap_or_else(|| {
                        CallerLimits::default_share(shares.journeys, callers.len(), 1)
                    }),
                },
            });
            let slots = [
                (&c.jwt_subject, &mut table.by_subject),
                (&c.spiffe_id, &mut table.by_spiffe),
                (&c.dns_name, &mut table.by_dns),
            ];
            for (id, map) in slots {
                if let Some(id) = id {
                    map.insert(id.clone(), Arc::clone(&caller));
                }
            }
        }
        Ok(table)
    }

    /// The caller of `identity`, if any.
    pub fn resolve(&self, identity: &Identity) -> Option<Arc<Caller>> {
        let found = match identity {
            Identity::JwtSubject(s) => self.by_subject.get(&**s),
            Identity::Mtls(MtlsIdentity::Spiffe(id)) => self.by_spiffe.get(id),
            Identity::Mtls(MtlsIdentity::Dns(name)) => self.by_dns.get(name),
        };
        found.cloned()
    }

    /// The caller `identity` resolves to, if it is still the entry named
    /// `name`: what a reload left of a caller resolved before it (an
    /// identity moved to another entry is not the same caller).
    pub fn still(&self, identity: &Identity, name: &CallerName) -> Option<Arc<Caller>> {
        self.resolve(identity).filter(|c| c.name == *name)
    }

    /// Every caller, once each (for per-caller limits and metrics set up).
    pub fn callers(&self) -> Vec<Arc<Caller>> {
        let mut all: Vec<Arc<Caller>> = self
            .by_subject
            .values()
            .chain(self.by_spiffe.values())
            .chain(self.by_dns.values())
            .cloned()
            .collect();
        all.sort_by(|a, b| a.name.cmp(&b.name));
        all.dedup_by(|a, b| a.name == b.name);
        all
    }
}

/// A caller table's later versions, one per reload: what an open stream
/// watches to learn that its caller's entry may have changed
/// ([`Policy::subscribe`]).
pub type CallerUpdates = watch::Receiver<Arc<CallerTable>>;

/// The current caller table, replaceable at run time. Its versions go
/// through a `tokio::sync::watch`, so that open streams wake on a reload
/// and nothing else: a stream polls no table between reloads.
#[derive(Debug)]
pub struct Policy {
    table: watch::Sender<Arc<CallerTable>>,
}

impl Default for Policy {
    fn default() -> Self {
        Self::new(CallerTable::default())
    }
}

impl Policy {
    /// A policy over `table`.
    pub fn new(table: CallerTable) -> Self {
        Self {
            table: watch::Sender::new(Arc::new(table)),
        }
    }

    /// The caller of `identity` in the current table.
    pub fn resolve(&self, identity: &Identity) -> Option<Arc<Caller>> {
        self.table.borrow().resolve(identity)
    }

    /// The current table.
    pub fn current(&self) -> Arc<CallerTable> {
        Arc::clone(&self.table.borrow())
    }

    /// Replaces the table (SIGHUP); calls in flight keep their caller,
    /// and every [`CallerUpdates`] is woken.
    pub fn replace(&self, table: CallerTable) {
        self.table.send_replace(Arc::new(table));
    }

    /// The tables that replace the current one from now on.
    pub fn subscribe(&self) -> CallerUpdates {
        self.table.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{JourneyScope, Permission, ResultView};

    fn configs(text: &str) -> Vec<CallerConfig> {
        #[derive(serde::Deserialize)]
        struct Doc {
            callers: Vec<CallerConfig>,
        }
        toml::from_str::<Doc>(text).unwrap().callers
    }

    const TABLE: &str = r#"
        [[callers]]
        name = "onboarding"
        jwt_subject = "system:serviceaccount:onboarding:api"
        operator_profiles = ["default"]
        operations = ["create_journey", "watch"]
        [[callers]]
        name = "backoffice"
        spiffe_id = "spiffe://corp/ns/backoffice/sa/api"
        operations = ["read_result"]
        journeys = "any"
        result_view = "status_only"
        max_watch_streams = 3
        [[callers]]
        name = "legacy"
        dns_name = "legacy.corp.example"
        operations = ["read_result"]
    "#;

    #[test]
    fn identities_resolve_to_their_callers() {
        let table = CallerTable::build(&configs(TABLE), &Shares::UNBOUNDED).unwrap();
        let a = table
            .resolve(&Identity::JwtSubject(
                "system:serviceaccount:onboarding:api".into(),
            ))
            .unwrap();
        assert_eq!(a.name.as_str(), "onboarding");
        assert!(a.may(Permission::Watch) && !a.may(Permission::ReadResult));
        assert_eq!(a.journeys, JourneyScope::Own);
        assert_eq!(a.result_view, ResultView::Full);
        assert_eq!(
            (a.limits.max_in_flight, a.limits.max_watch_streams),
            (
                CallerLimits::DEFAULT_MAX_IN_FLIGHT,
                CallerLimits::DEFAULT_MAX_WATCH_STREAMS
            )
        );
        let b = table
            .resolve(&Identity::Mtls(MtlsIdentity::Spiffe(
                "spiffe://corp/ns/backoffice/sa/api".into(),
            )))
            .unwrap();
        assert_eq!(b.result_view, ResultView::StatusOnly);
        assert_eq!(b.limits.max_watch_streams, 3);
        assert!(!b.may_use_profile("default"));
        let c = table.resolve(&Identity::Mtls(MtlsIdentity::Dns(
            "legacy.corp.example".into(),
        )));
        assert_eq!(c.unwrap().name.as_str(), "legacy");
        // The same text under another kind of identity is nobody.
        assert!(
            table
                .resolve(&Identity::JwtSubject(
                    "spiffe://corp/ns/backoffice/sa/api".into()
                ))
                .is_none()
        );
        assert_eq!(table.callers().len(), 3);
    }

    #[test]
    fn shares_not_set_divide_the_process_s_bounds_among_the_callers() {
        let shares = Shares {
            body_bytes: 1000,
            journeys: 90,
            small_message: 10,
            document_message: 600,
        };
        let table = CallerTable::build(&configs(TABLE), &shares).unwrap();
        let callers = table.callers();
        assert_eq!(callers.len(), 3);
        for caller in &callers {
            // Three callers: a third each.
            assert_eq!(caller.limits.max_body_bytes, 333);
            assert_eq!(caller.limits.max_journeys, 30);
        }
        // A byte share never below the largest message the caller may
        // send: a document sender's default is one document message, and
        // a share set below it is refused, naming the key.
        let documents = TABLE.replace(
            "legacy.corp.example\"\n        operations = [\"read_result\"]",
            "legacy.corp.example\"\n        operations = [\"documents\"]",
        );
        assert_ne!(documents, TABLE);
        let table = CallerTable::build(&configs(&documents), &shares).unwrap();
        let legacy = table
            .resolve(&Identity::Mtls(MtlsIdentity::Dns(
                "legacy.corp.example".into(),
            )))
            .unwrap();
        assert_eq!(legacy.limits.max_body_bytes, 600);
        let set = format!("{TABLE}max_body_bytes = 5\n");
        let err = CallerTable::build(&configs(&set), &shares)
            .unwrap_err()
            .to_string();
        assert!(err.contains("callers[2].max_body_bytes"), "{err}");
    }

    #[test]
    fn a_replaced_table_answers_from_then_on() {
        let policy = Policy::new(CallerTable::build(&configs(TABLE), &Shares::UNBOUNDED).unwrap());
        let id = Identity::JwtSubject("system:serviceaccount:onboarding:api".into());
        let held = policy.resolve(&id).unwrap();
        let mut updates = policy.subscribe();
        assert!(!updates.has_changed().unwrap());
        policy.replace(CallerTable::default());
        assert!(policy.resolve(&id).is_none());
        assert_eq!(held.name.as_str(), "onboarding");
        assert!(updates.has_changed().unwrap(), "a subscriber is told");
        assert!(updates.borrow_and_update().still(&id, &held.name).is_none());
    }

    #[test]
    fn an_identity_moved_to_another_entry_is_not_still_its_caller() {
        let table = CallerTable::build(&configs(TABLE), &Shares::UNBOUNDED).unwrap();
        let id = Identity::Mtls(MtlsIdentity::Dns("legacy.corp.example".into()));
        let legacy = CallerName::new("legacy");
        assert!(table.still(&id, &legacy).is_some());
        let moved = configs(&TABLE.replace("name = \"legacy\"", "name = \"renamed\""));
        let table = CallerTable::build(&moved, &Shares::UNBOUNDED).unwrap();
        assert!(table.still(&id, &legacy).is_none());
        assert!(table.still(&id, &CallerName::new("renamed")).is_some());
    }
}
