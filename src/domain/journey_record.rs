//! The journey record: everything the gateway keeps of a journey it
//! created, in one value with one lifetime (`[journeys] retention_hours`).
//!
//! Who owns the journey, which appkey it is, which operator profile pays
//! for it and which `request_id` made it were once kept in three rooms
//! with three lifetimes (the watches' directory, the guard's idempotency
//! record, the guard's profile map); a journey forgotten by one and
//! remembered by another could be handed to another caller. Every check
//! now reads this record: the access check (issued here? whose?), watch
//! by reference, billing by profile, and idempotent replays.
//!
//! It holds no personal data: the appkey (a secret, sealed wherever it is
//! shared), configured names, a digest and a time.

use std::fmt;

use super::{Appkey, CallerName};

/// The idempotency key of the `CreateJourney` that made a journey: the
/// hex of the first 16 bytes of SHA-256 over its caller, operator profile
/// and `request_id` (no personal data, stable across secret rotations).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct RequestKey(String);

impl RequestKey {
    /// A key as the guard computed it (lower-case hex).
    pub fn new(hex: impl Into<String>) -> Self {
        Self(hex.into())
    }

    /// The key as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for RequestKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What the gateway keeps of a journey it created.
#[derive(Clone, PartialEq, Eq)]
pub struct JourneyRecord {
    /// The journey's appkey (sealed wherever the record is shared).
    pub appkey: Appkey,
    /// The caller that created it; `None`: the open caller of a gateway
    /// without `[auth]`, so only `journeys = "any"` callers may touch it.
    pub owner: Option<CallerName>,
    /// The operator profile that created (and pays for) the journey;
    /// `None`: profiles unknown to the gateway.
    pub profile: Option<String>,
    /// The idempotency key of the request that made it, if it named a
    /// `request_id`: a replay must match it.
    pub request: Option<RequestKey>,
    /// When the journey was created, Unix seconds.
    pub created_unix: i64,
}

impl JourneyRecord {
    /// A record of `appkey` owned by `owner`, with no profile and no
    /// request, created at `created_unix`.
    pub fn new(appkey: Appkey, owner: Option<CallerName>, created_unix: i64) -> Self {
        Self {
            appkey,
            owner,
            profile: None,
            request: None,
            created_unix,
        }
    }

    /// The record as one line of text, to be sealed whole: creation time,
    /// owner, profile, request key, then the appkey (last, so nothing in
    /// it can shift a field). Names and profiles are configured
    /// identifiers without newlines; an empty field is `None`.
    pub fn encode(&self) -> String {
        let opt = |v: Option<&str>| v.unwrap_or_default().to_owned();
        format!(
            "{}\n{}\n{}\n{}\n{}",
            self.created_unix,
            opt(self.owner.as_ref().map(CallerName::as_str)),
            opt(self.profile.as_deref()),
            opt(self.request.as_ref().map(RequestKey::as_str)),
            self.appkey.expose()
        )
    }

    /// The record [`JourneyRecord::encode`] wrote; `None` when `text` is
    /// not one.
    pub fn decode(text: &str) -> Option<Self> {
        let mut fields = text.splitn(5, '\n');
        let created_unix = fields.next()?.parse().ok()?;
        let some = |s: &str| (!s.is_empty()).then(|| s.to_owned());
        let owner = some(fields.next()?).map(CallerName::new);
        let profile = some(fields.next()?);
        let request = some(fields.next()?).map(RequestKey::new);
        let appkey = fields.next().filter(|a| !a.is_empty())?;
        Some(Self {
            appkey: Appkey::new(appkey),
            owner,
            profile,
            request,
            created_unix,
        })
    }
}

impl fmt::Debug for JourneyRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JourneyRecord")
            .field("appkey", &self.appkey)
            .field("owner", &self.owner)
            .field("profile", &self.profile)
            .field("request", &self.request)
            .field("created_unix", &self.created_unix)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_round_trips_through_its_text_and_shows_no_appkey() {
        let full = JourneyRecord {
            appkey: Appkey::new("canary-appkey\nwith a newline"),
            owner: Some(CallerName::new("onboarding")),
            profile: Some("premium".to_owned()),
            request: Some(RequestKey::new("00ff")),
            created_unix: 1_700_000_000,
        };
        assert_eq!(JourneyRecord::decode(&full.encode()), Some(full.clone()));
        let bare = JourneyRecord::new(Appkey::new("k"), None, 0);
        assert_eq!(JourneyRecord::decode(&bare.encode()), Some(bare));
        assert!(!format!("{full:?}").contains("canary"));
        assert_eq!(JourneyRecord::decode("not a record"), None);
        assert_eq!(JourneyRecord::decode("1\n\n\n\n"), None, "no appkey");
    }
}
