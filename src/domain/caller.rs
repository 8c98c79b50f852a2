//! Who calls the public API and what that caller may do: the vocabulary of
//! authorization, shared by the layer that authenticates a request, the
//! handlers that check each call, journey ownership, views of the result,
//! audit records and per-caller limits.
//!
//! A [`Caller`] is an entry of the `[[callers]]` table, resolved once per
//! request from a verified identity (an mTLS SPIFFE ID or a JWT subject)
//! and handed to the handlers in the request's extensions as
//! `Arc<Caller>`. Its [`CallerName`] is configuration, not personal data:
//! it may appear in logs, spans, audit records, the journey directory, the
//! `caller` label of the `idgate_caller_*` metrics and the usage report
//! (the caller table bounds it; an identity no entry names is never a
//! caller).

use std::{fmt, sync::Arc};

/// The configured name of a caller (`[[callers]] name`): cheap to clone,
/// safe to log and to store with a journey as its owner.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CallerName(Arc<str>);

impl CallerName {
    /// The name as configured.
    pub fn new(name: impl Into<Arc<str>>) -> Self {
        Self(name.into())
    }

    /// The name as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for CallerName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for CallerName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One operation of the public API a caller may be granted
/// (`[[callers]] operations`). Each names a group of RPCs that do one job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Permission {
    /// `CreateJourney`: a new appkey, billed by the vendor.
    CreateJourney,
    /// `CreateChallenges` and `SubmitChallengeResponse` (2D liveness).
    Challenges2D,
    /// `StartSession3D`.
    Session3D,
    /// `VerifyLiveness3D`.
    Verify3D,
    /// `SubmitDocumentImages` and `SubmitDigitalLicence`.
    Documents,
    /// `GetJourneyResult`.
    ReadResult,
    /// `WatchJourney`.
    Watch,
}

impl Permission {
    /// Every permission, in the order of the configuration docs.
    pub const ALL: [Permission; 7] = [
        Permission::CreateJourney,
        Permission::Challenges2D,
        Permission::Session3D,
        Permission::Verify3D,
        Permission::Documents,
        Permission::ReadResult,
        Permission::Watch,
    ];

    /// The configuration name (`operations = [...]`), also used in error
    /// metadata and audit records.
    pub fn as_str(self) -> &'static str {
        match self {
            Permission::CreateJourney => "create_journey",
            Permission::Challenges2D => "challenges_2d",
            Permission::Session3D => "session_3d",
            Permission::Verify3D => "verify_3d",
            Permission::Documents => "documents",
            Permission::ReadResult => "read_result",
            Permission::Watch => "watch",
        }
    }

    /// The permission of a configuration name.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.as_str() == name)
    }

    const fn bit(self) -> u8 {
        1 << self as u8
    }
}

impl fmt::Display for Permission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A set of [`Permission`]s (a bit set: checked on every call).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Permissions(u8);

impl Permissions {
    /// No permission.
    pub const NONE: Permissions = Permissions(0);

    /// Every permission.
    pub fn all() -> Self {
        Permission::ALL.into_iter().collect()
    }

    /// Whether `permission` is in the set.
    pub fn contains(self, permission: Permission) -> bool {
        self.0 & permission.bit() != 0
    }

    /// The set with `permission` added.
    #[must_use]
    pub fn with(self, permission: Permission) -> Self {
        Self(self.0 | permission.bit())
    }

    /// The permissions in the set, in [`Permission::ALL`] order.
    pub fn iter(self) -> impl Iterator<Item = Permission> {
        Permission::ALL
            .into_iter()
            .filter(move |p| self.contains(*p))
    }
}

impl FromIterator<Permission> for Permissions {
    fn from_iter<I: IntoIterator<Item = Permission>>(iter: I) -> Self {
        iter.into_iter().fold(Self::NONE, Self::with)
    }
}

impl fmt::Debug for Permissions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set()
            .entries(self.iter().map(Permission::as_str))
            .finish()
    }
}

/// Which journeys a caller may act on (`[[callers]] journeys`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum JourneyScope {
    /// Only journeys this caller created (the default).
    #[default]
    Own,
    /// Any journey, whoever created it (a back office, a reviewer).
    Any,
}

impl JourneyScope {
    /// The configuration name.
    pub fn as_str(self) -> &'static str {
        match self {
            JourneyScope::Own => "own",
            JourneyScope::Any => "any",
        }
    }

    /// The scope of a configuration name.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "own" => Some(JourneyScope::Own),
            "any" => Some(JourneyScope::Any),
            _ => None,
        }
    }
}

/// How much of a journey's result a caller is given (`[[callers]]
/// result_view`; data minimisation, LGPD art. 6 III).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum ResultView {
    /// The journey status and verdict codes only: no OCR, no name, no CPF,
    /// no image.
    StatusOnly,
    /// Everything but images and photos.
    NoImages,
    /// The whole result, biometrics included (the default, as before
    /// callers existed).
    #[default]
    Full,
}

impl ResultView {
    /// The configuration name, also used in audit records.
    pub fn as_str(self) -> &'static str {
        match self {
            ResultView::Full => "full",
            ResultView::NoImages => "no_images",
            ResultView::StatusOnly => "status_only",
        }
    }

    /// The view of a configuration name.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "full" => Some(ResultView::Full),
            "no_images" => Some(ResultView::NoImages),
            "status_only" => Some(ResultView::StatusOnly),
            _ => None,
        }
    }
}

/// Operator profiles a caller may create journeys on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProfileGrant {
    /// Any configured profile (only [`Caller::open`]).
    Any,
    /// These profiles (`[[callers]] operator_profiles`).
    Only(Arc<[String]>),
}

/// Limits one caller has on the public listener, so that no caller takes
/// every slot of the gateway's own caps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallerLimits {
    /// Unary calls in flight at once for this caller.
    pub max_in_flight: usize,
    /// `WatchJourney` streams open at once for this caller.
    pub max_watch_streams: usize,
    /// Request bytes this caller's calls may be receiving at once: its
    /// share of `[serving] max_body_bytes_in_flight`.
    pub max_body_bytes: usize,
    /// Live journey records this caller may hold: its share of
    /// `[journeys] max_entries`.
    pub max_journeys: usize,
}

impl CallerLimits {
    /// Default of `[[callers]] max_in_flight`: a quarter of the gateway's
    /// default `[serving] max_in_flight` (1024).
    pub const DEFAULT_MAX_IN_FLIGHT: usize = 256;
    /// Default of `[[callers]] max_watch_streams`: a tenth of the
    /// gateway's default `[serving] max_streams` (10 000).
    pub const DEFAULT_MAX_WATCH_STREAMS: usize = 1000;
}

impl CallerLimits {
    /// The default share of a process-wide bound `total` for one of
    /// `callers` configured callers: an equal part, so that whatever one
    /// caller holds, every other still has its own part; but never less
    /// than `at_least` (one largest message the caller may send: a share
    /// below it could never be served).
    pub fn default_share(total: usize, callers: usize, at_least: usize) -> usize {
        (total / callers.max(1)).max(at_least)
    }
}

/// The defaults of the limits that are not shares; the shares are the
/// process's whole bounds until a caller table divides them.
impl Default for CallerLimits {
    fn default() -> Self {
        Self {
            max_in_flight: Self::DEFAULT_MAX_IN_FLIGHT,
            max_watch_streams: Self::DEFAULT_MAX_WATCH_STREAMS,
            max_body_bytes: usize::MAX,
            max_journeys: usize::MAX,
        }
    }
}

/// Why a configuration reload ended a caller's open `WatchJourney`
/// stream (`PERMISSION_DENIED` / `CALLER_REVOKED`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Revocation {
    /// The identity the stream was opened with names no `[[callers]]`
    /// entry any more, or another entry than the one it named.
    Removed,
    /// The entry no longer grants `watch`.
    Operation,
    /// The entry's journeys narrowed to its own, and the watched journey
    /// is not one of them.
    Journeys,
}

impl Revocation {
    /// A fixed word, for error metadata, logs and metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            Revocation::Removed => "removed",
            Revocation::Operation => "operation",
            Revocation::Journeys => "journeys",
        }
    }
}

/// A caller of the public API and its policy: one `[[callers]]` entry.
///
/// Handlers read it from the request's extensions as `Arc<Caller>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The configured name.
    pub name: CallerName,
    /// The operations granted.
    pub permissions: Permissions,
    /// The operator profiles it may create journeys on.
    pub profiles: ProfileGrant,
    /// Own or any journeys.
    pub journeys: JourneyScope,
    /// How much of a result it is given.
    pub result_view: ResultView,
    /// Its share of the listener's caps.
    pub limits: CallerLimits,
}

impl Caller {
    /// The name [`Caller::open`] goes by.
    pub const OPEN_NAME: &'static str = "anonymous";

    /// The caller of a gateway that runs open (`[auth] mode = "none"`, the
    /// embedded sandbox): every operation, any profile, any journey, the
    /// full result, and the listener's own caps as its only limits.
    pub fn open() -> Self {
        Self {
            name: CallerName::new(Self::OPEN_NAME),
            permissions: Permissions::all(),
            profiles: ProfileGrant::Any,
            journeys: JourneyScope::Any,
            result_view: ResultView::Full,
            limits: CallerLimits {
                max_in_flight: usize::MAX,
                max_watch_streams: usize::MAX,
                max_body_bytes: usize::MAX,
                max_journeys: usize::MAX,
            },
        }
    }

    /// Whether the caller may perform `permission`.
    pub fn may(&self, permission: Permission) -> bool {
        self.permissions.contains(permission)
    }

    /// Whether the caller may create journeys on operator profile `profile`.
    pub fn may_use_profile(&self, profile: &str) -> bool {
        match &self.profiles {
            ProfileGrant::Any => true,
            ProfileGrant::Only(names) => names.iter().any(|n| n == profile),
        }
    }

    /// The owner a journey created by this caller is recorded with: its
    /// name, or none for the open caller of a gateway without `[auth]`
    /// (so that, once callers are configured, only `any` callers touch
    /// those journeys).
    pub fn owner(&self) -> Option<CallerName> {
        match self.profiles {
            ProfileGrant::Any => None,
            ProfileGrant::Only(_) => Some(self.name.clone()),
        }
    }

    /// Whether the caller may act on a journey owned by `owner` (`None`: a
    /// journey with no recorded owner, created while the gateway ran open
    /// or before owners were recorded; only `any` callers may touch it).
    pub fn may_touch(&self, owner: Option<&CallerName>) -> bool {
        match self.journeys {
            JourneyScope::Any => true,
            JourneyScope::Own => owner == Some(&self.name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn onboarding() -> Caller {
        Caller {
            name: CallerName::new("onboarding"),
            permissions: [Permission::CreateJourney, Permission::Watch]
                .into_iter()
                .collect(),
            profiles: ProfileGrant::Only(vec!["default".to_owned()].into()),
            journeys: JourneyScope::Own,
            result_view: ResultView::NoImages,
            limits: CallerLimits::default(),
        }
    }

    #[test]
    fn permission_names_round_trip() {
        for p in Permission::ALL {
            assert_eq!(Permission::parse(p.as_str()), Some(p));
        }
        assert_eq!(Permission::parse("admin"), None);
        for v in [
            ResultView::Full,
            ResultView::NoImages,
            ResultView::StatusOnly,
        ] {
            assert_eq!(ResultView::parse(v.as_str()), Some(v));
        }
        for s in [JourneyScope::Own, JourneyScope::Any] {
            assert_eq!(JourneyScope::parse(s.as_str()), Some(s));
        }
    }

    #[test]
    fn a_caller_may_only_what_it_was_granted() {
        let c = onboarding();
        assert!(c.may(Permission::CreateJourney));
        assert!(c.may(Permission::Watch));
        assert!(!c.may(Permission::ReadResult));
        assert!(c.may_use_profile("default"));
        assert!(!c.may_use_profile("premium"));
        assert_eq!(
            format!("{:?}", c.permissions),
            r#"{"create_journey", "watch"}"#
        );
    }

    #[test]
    fn own_scope_touches_only_its_own_journeys() {
        let c = onboarding();
        assert!(c.may_touch(Some(&CallerName::new("onboarding"))));
        assert!(!c.may_touch(Some(&CallerName::new("backoffice"))));
        assert!(!c.may_touch(None));
    }

    #[test]
    fn the_open_caller_may_everything() {
        let c = Caller::open();
        assert!(Permission::ALL.into_iter().all(|p| c.may(p)));
        assert!(c.may_use_profile("anything"));
        assert!(c.may_touch(None));
        assert!(c.may_touch(Some(&CallerName::new("x"))));
        assert_eq!(c.result_view, ResultView::Full);
    }
}
