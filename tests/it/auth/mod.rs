//! Callers on the public listener, over real sockets: every JWT rule end
//! to end, keys from a file and from a JWKS URL that rotates, SPIFFE IDs
//! from client certificates, the `[[callers]]` policy (unknown callers,
//! operations and operator profiles outside it), reloads of the callers
//! (all or nothing, reaching open streams), and secure defaults (a
//! gateway in front of a real upstream refuses to start open).

mod audit;
mod certificates;
mod foreign;
mod jwks_url;
mod jwt;
mod limits;
mod mtls;
mod neighbours;
mod owners;
mod policy;
mod refusals;
mod reloads;
mod request_ids;
mod startup;
mod views;

use idgate::{auth::AuthConfig, config::Config};

use crate::support::{gateway::TestGateway, jwt::callers};

/// The callers every test here knows (the embedded sandbox's one operator
/// profile is `sandbox`).
pub const CALLERS: &str = r#"
    [[callers]]
    name = "onboarding"
    jwt_subject = "svc-onboarding"
    operator_profiles = ["sandbox"]
    operations = ["create_journey", "challenges_2d", "session_3d", "verify_3d", "documents", "read_result", "watch"]

    [[callers]]
    name = "reader"
    jwt_subject = "svc-reader"
    operations = ["read_result"]
    journeys = "any"

    [[callers]]
    name = "elsewhere"
    jwt_subject = "svc-elsewhere"
    operations = ["create_journey"]
"#;

/// A gateway on its embedded sandbox with `auth` and [`CALLERS`].
pub async fn gateway_with(auth: AuthConfig, edit: impl FnOnce(&mut Config)) -> TestGateway {
    TestGateway::start_with(|c| {
        c.auth = Some(auth);
        c.callers = callers(CALLERS);
        edit(c);
    })
    .await
}

/// The value of the `idgate_auth_refusals_total` series of `reason` and
/// `cause` in `metrics` (0 for a pair never counted; a panic if the
/// metric is not declared at all).
pub fn refusals(metrics: &str, reason: &str, cause: &str) -> f64 {
    crate::support::metrics::counted(
        metrics,
        &format!("idgate_auth_refusals_total{{reason=\"{reason}\",cause=\"{cause}\"}}"),
    )
}
