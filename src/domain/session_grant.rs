//! A 3D liveness session as a channel granted it: one shape from the
//! REST client's parse of `/3d/session-token` through the router to the
//! API's answer (`docs/upstream.md#3d-session-3dsession-token`).

use super::SessionToken;

/// A 3D session as the channel granted it. The token is a bearer secret
/// ([`SessionToken`] redacts it in `Debug`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionGrant {
    /// Session token for the front-end SDK (`token` or `sessionToken`).
    pub token: SessionToken,
    /// Vendor name (`vendor`).
    pub vendor: String,
    /// Vendor service address for the SDK (`url`).
    pub vendor_url: String,
    /// `isContingency`.
    pub contingency: bool,
}
