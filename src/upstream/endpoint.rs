//! Where REST operations go: URLs joined and parsed once, when the client
//! or a channel is built, never per call.

use std::{fmt, sync::Arc, time::Duration};

use http::{Method, Uri};
use reqwest::Url;
use tokio::sync::Semaphore;

use crate::{
    domain::Operation,
    telemetry::{CallTarget, ChannelLabel},
};

/// One operation's URL, parsed once: the `Uri` its requests carry and what
/// its client span shows ([`CallTarget`]). Cloning shares it.
#[derive(Clone)]
pub(crate) struct Target(Arc<TargetInner>);

struct TargetInner {
    uri: Uri,
    call: CallTarget,
}

impl Target {
    /// The URL as text.
    #[cfg(test)]
    pub(crate) fn to_text(&self) -> String {
        self.0.uri.to_string()
    }

    /// The request URI.
    pub(crate) fn uri(&self) -> &Uri {
        &self.0.uri
    }

    /// What the client span shows of it.
    pub(crate) fn call(&self) -> &CallTarget {
        &self.0.call
    }
}

impl fmt::Debug for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The configured URL may carry user information: show the target.
        f.debug_tuple("Target").field(&self.0.call).finish()
    }
}

impl PartialEq for Target {
    fn eq(&self, other: &Self) -> bool {
        self.0.uri == other.0.uri
    }
}

impl Eq for Target {}

/// `base` + `path`, keeping the base's own path (`Url::join` would replace
/// it); `None` unless the result is an `http` or `https` URL that is also
/// a valid request URI.
pub(crate) fn join(base: &str, path: &str) -> Option<Target> {
    let base = base.trim_end_matches('/');
    let path = path.trim_start_matches('/');
    let url = Url::parse(&format!("{base}/{path}"))
        .ok()
        .filter(|u| matches!(u.scheme(), "http" | "https"))?;
    let uri: Uri = url.as_str().parse().ok()?;
    let call = CallTarget::new(&Method::POST, url.as_str());
    Some(Target(Arc::new(TargetInner { uri, call })))
}

/// A bulkhead: at most its size of requests in flight to one upstream or
/// channel. Acquired without waiting: a full bulkhead refuses at once.
#[derive(Debug, Clone)]
pub struct Bulkhead {
    permits: Arc<Semaphore>,
    size: usize,
}

impl Bulkhead {
    /// Room for `size` requests in flight (at least 1).
    pub fn new(size: usize) -> Self {
        let size = size.clamp(1, Semaphore::MAX_PERMITS);
        Self {
            permits: Arc::new(Semaphore::new(size)),
            size,
        }
    }

    /// A slot, or `None` when every slot is taken.
    pub fn try_enter(&self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        Arc::clone(&self.permits).try_acquire_owned().ok()
    }

    /// Requests in flight now.
    pub fn in_flight(&self) -> usize {
        self.size - self.permits.available_permits()
    }

    /// The most requests in flight at once.
    pub fn size(&self) -> usize {
        self.size
    }
}

impl Default for Bulkhead {
    fn default() -> Self {
        Self::new(crate::upstream::DEFAULT_MAX_CONCURRENT_REQUESTS)
    }
}

/// A 3D liveness vendor channel's address: where `/3d/session-token` and
/// `/3d/liveness` go, with the channel's timeout and bulkhead. The channel
/// router builds one per configured channel (and rebuilds it on reload);
/// the client sends on it with its pools.
#[derive(Debug, Clone)]
pub struct ChannelEndpoint {
    name: String,
    /// `name` as a metric label, made once per endpoint.
    label: ChannelLabel,
    base_url: String,
    /// `None` when the configured URL does not parse: calls then fail as
    /// a connect failure, without sending anything.
    session_token_url: Option<Target>,
    liveness_url: Option<Target>,
    timeout: Duration,
    bulkhead: Bulkhead,
}

/// Equal when they send to the same place with the same settings (each
/// keeps its own bulkhead).
impl PartialEq for ChannelEndpoint {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
            && self.base_url == other.base_url
            && self.session_token_url == other.session_token_url
            && self.liveness_url == other.liveness_url
            && self.timeout == other.timeout
            && self.bulkhead.size() == other.bulkhead.size()
    }
}

impl Eq for ChannelEndpoint {}

impl ChannelEndpoint {
    /// A channel at `base_url` with its two operation paths and the name
    /// `core`.
    pub fn new(
        base_url: impl Into<String>,
        session_token_path: impl AsRef<str>,
        liveness_path: impl AsRef<str>,
        timeout: Duration,
    ) -> Self {
        let base_url = base_url.into();
        ChannelEndpoint {
            session_token_url: join(&base_url, session_token_path.as_ref()),
            liveness_url: join(&base_url, liveness_path.as_ref()),
            base_url,
            timeout,
            name: "core".to_owned(),
            label: ChannelLabel::new("core"),
            bulkhead: Bulkhead::default(),
        }
    }

    /// Sets the channel's bulkhead size.
    pub fn with_max_concurrent_requests(mut self, max: usize) -> Self {
        self.bulkhead = Bulkhead::new(max);
        self
    }

    /// The channel's bulkhead.
    pub fn bulkhead(&self) -> &Bulkhead {
        &self.bulkhead
    }

    /// Names the channel in spans and metrics.
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self.label = ChannelLabel::new(&self.name);
        self
    }

    /// The channel's name, for spans and metrics.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The channel's name as a label (cloning it allocates nothing).
    pub(crate) fn label(&self) -> &ChannelLabel {
        &self.label
    }

    /// The base URL as configured.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// Timeout of one call on this channel.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// True when both operation URLs parse.
    pub fn is_valid(&self) -> bool {
        self.session_token_url.is_some() && self.liveness_url.is_some()
    }

    /// The URL of `op` (a 3D operation) on this channel.
    pub(crate) fn url(&self, op: Operation) -> Option<&Target> {
        match op {
            Operation::SessionToken3D => self.session_token_url.as_ref(),
            Operation::Liveness3D => self.liveness_url.as_ref(),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn join_keeps_the_base_path() {
        let u = join("http://h:1/facecaptcha/", "/service/captcha/appkey").unwrap();
        assert_eq!(u.to_text(), "http://h:1/facecaptcha/service/captcha/appkey");
        assert!(join("", "/x").is_none());
        assert!(join("ftp://h", "/x").is_none());
    }

    #[test]
    fn a_channel_parses_its_urls_once_and_reports_a_bad_one() {
        let ok = ChannelEndpoint::new("http://v/alt", "/s", "/l", Duration::from_secs(1));
        assert!(ok.is_valid());
        assert_eq!(
            ok.url(Operation::Liveness3D).map(Target::to_text),
            Some("http://v/alt/l".to_owned())
        );
        assert!(ok.url(Operation::Result).is_none());
        let bad = ChannelEndpoint::new("not a url", "/s", "/l", Duration::from_secs(1));
        assert!(!bad.is_valid());
        assert!(bad.url(Operation::SessionToken3D).is_none());
    }
}
