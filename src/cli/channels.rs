//! Support for `idgate channels list|mode|drain|undrain`: each function
//! calls `ChannelAdminService` at an admin address with the bearer token and
//! returns text to print. Argument parsing (clap) lives in `main.rs`;
//! `idgate channels compare` in [`super::compare`].

use std::fmt::Write as _;

use tonic::{
    Code, Request, Status,
    metadata::{Ascii, MetadataValue},
    service::{Interceptor, interceptor::InterceptedService},
    transport::Channel,
};
use tonic_types::StatusExt;

use super::tls::{ClientTls, ClientTlsError};
use crate::{
    channels::{ChannelConfigError, RoutingMode},
    domain::AdminToken,
    proto::v1::{self as pb, channel_admin_service_client::ChannelAdminServiceClient},
};

/// Default admin address of `idgate serve`.
pub const DEFAULT_ADMIN_ADDR: &str = "http://127.0.0.1:50052";

/// Why an `idgate channels` command failed. Messages name addresses,
/// codes and reasons, never the token.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The token cannot travel in an HTTP header.
    #[error("the admin token contains characters not allowed in a header")]
    TokenNotAHeader,
    /// The admin address is not a usable URL, or a TLS file is missing.
    #[error(transparent)]
    Address(#[from] ClientTlsError),
    /// The admin listener could not be reached.
    #[error("cannot connect to the admin listener at {url}")]
    Connect {
        /// The admin URL.
        url: String,
        /// Why.
        #[source]
        source: tonic::transport::Error,
    },
    /// The routing mode given is not one the gateway knows. The operator's
    /// own input is quoted back to their terminal; the library's error
    /// quotes nothing.
    #[error("`{given}`: {source}")]
    Mode {
        /// What was typed.
        given: String,
        /// Why it is not a mode.
        #[source]
        source: ChannelConfigError,
    },
    /// An option of the command is malformed; nothing was sent.
    #[error("{flag}: {why}")]
    Argument {
        /// The option (`--steps`, ...).
        flag: &'static str,
        /// Why.
        why: String,
    },
    /// `--window` is not a duration the gateways accept.
    #[error("--window: {0}")]
    Window(&'static str),
    /// A gateway's figures cannot be merged with the others.
    #[error(transparent)]
    Figures(#[from] crate::api::figures::FiguresError),
    /// The gateway refused or failed the call.
    #[error("{code:?}{}: {message}{}", reason.as_deref().map(|r| format!(" [{r}]")).unwrap_or_default(), violations.iter().map(|v| format!("\n  {v}")).collect::<String>())]
    Refused {
        /// The gRPC code.
        code: Code,
        /// The `ErrorInfo.reason`, when the gateway sent one.
        reason: Option<String>,
        /// The status message.
        message: String,
        /// Every `BadRequest` field violation and `PreconditionFailure`
        /// violation, one line each (`field: description`).
        violations: Vec<String>,
    },
}

/// Adds `authorization: Bearer <token>` to every call, marked sensitive so
/// tonic and hyper never print it.
#[derive(Clone)]
pub struct BearerAuth(MetadataValue<Ascii>);

impl Interceptor for BearerAuth {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        request
            .metadata_mut()
            .insert("authorization", self.0.clone());
        Ok(request)
    }
}

/// An admin client.
pub type AdminClient = ChannelAdminServiceClient<InterceptedService<Channel, BearerAuth>>;

/// An admin listener's address and how to reach it: `host:port` or a
/// URL (`https://` for a listener with `[tls.admin]`), and the client's
/// TLS options.
#[derive(Debug, Clone)]
pub struct AdminTarget {
    /// The address.
    pub addr: String,
    /// `--ca`, `--cert`, `--key`.
    pub tls: ClientTls,
}

impl From<&str> for AdminTarget {
    fn from(addr: &str) -> Self {
        AdminTarget {
            addr: addr.to_owned(),
            tls: ClientTls::default(),
        }
    }
}

impl From<&String> for AdminTarget {
    fn from(addr: &String) -> Self {
        AdminTarget::from(addr.as_str())
    }
}

/// Connects to the admin listener at `target`.
pub async fn connect(
    target: impl Into<AdminTarget>,
    token: &AdminToken,
) -> Result<AdminClient, CliError> {
    let target = target.into();
    let mut header: MetadataValue<Ascii> = format!("Bearer {}", token.expose())
        .parse()
        .map_err(|_| CliError::TokenNotAHeader)?;
    header.set_sensitive(true);
    let endpoint = target.tls.endpoint(&target.addr)?;
    let url = endpoint.uri().to_string();
    let channel = match endpoint.connect().await {
        Ok(channel) => channel,
        Err(source) => return Err(CliError::Connect { url, source }),
    };
    Ok(ChannelAdminServiceClient::with_interceptor(
        channel,
        BearerAuth(header),
    ))
}

/// Turns a refused call into an error: code, reason, message, then each
/// violation the gateway named.
pub(super) fn explain(status: Status) -> CliError {
    CliError::Refused {
        code: status.code(),
        reason: status.get_details_error_info().map(|i| i.reason),
        message: status.message().to_owned(),
        violations: violations(&status),
    }
}

/// The `BadRequest` field violations and `PreconditionFailure` violations
/// of `status`, one `subject: description` line each, in full.
pub fn violations(status: &Status) -> Vec<String> {
    let details = status.get_error_details();
    let fields = details
        .bad_request()
        .into_iter()
        .flat_map(|b| &b.field_violations)
        .map(|v| format!("{}: {}", v.field, v.description));
    let preconditions = details
        .precondition_failure()
        .into_iter()
        .flat_map(|p| &p.violations)
        .map(|v| format!("{}: {}", v.subject, v.description));
    fields.chain(preconditions).collect()
}

/// `idgate channels list`.
pub async fn list(addr: impl Into<AdminTarget>, token: &AdminToken) -> Result<String, CliError> {
    let mut client = connect(addr, token).await?;
    let resp = client
        .list_channels(pb::ListChannelsRequest {})
        .await
        .map_err(explain)?
        .into_inner();
    Ok(format_list(&resp))
}

/// `idgate channels mode <auto|force_primary|force_alternative|channel:NAME|weighted:NAME=W,...>`.
pub async fn set_mode(
    addr: impl Into<AdminTarget>,
    token: &AdminToken,
    mode: &str,
) -> Result<String, CliError> {
    set_mode_forced(addr, token, mode, false).await
}

/// `idgate channels mode ... --force`: also gives weight to a channel
/// that failed its last conformance probe.
pub async fn set_mode_forced(
    addr: impl Into<AdminTarget>,
    token: &AdminToken,
    mode: &str,
    force: bool,
) -> Result<String, CliError> {
    let mode: RoutingMode = mode.parse().map_err(|source| CliError::Mode {
        given: mode.to_owned(),
        source,
    })?;
    let (pb_mode, channel) = crate::api::admin::mode_to_proto(&mode);
    let mut client = connect(addr, token).await?;
    let resp = client
        .set_routing_mode(pb::SetRoutingModeRequest {
            mode: pb_mode as i32,
            channel,
            weights: crate::api::admin::mode_weights(&mode),
            force,
        })
        .await
        .map_err(explain)?
        .into_inner();
    Ok(format!(
        "routing mode: {}\n",
        mode_text(resp.mode, &resp.mode_channel, &resp.weights)
    ))
}

/// `idgate channels drain NAME`.
pub async fn drain(
    addr: impl Into<AdminTarget>,
    token: &AdminToken,
    name: &str,
) -> Result<String, CliError> {
    let mut client = connect(addr, token).await?;
    let resp = client
        .drain_channel(pb::DrainChannelRequest {
            name: name.to_owned(),
        })
        .await
        .map_err(explain)?
        .into_inner();
    Ok(format!(
        "drained {name}: new sessions avoid it; verifications of its sessions still go to it\n{}",
        resp.channel
            .as_ref()
            .map(format_channel)
            .unwrap_or_default()
    ))
}

/// `idgate channels undrain NAME`.
pub async fn undrain(
    addr: impl Into<AdminTarget>,
    token: &AdminToken,
    name: &str,
) -> Result<String, CliError> {
    let mut client = connect(addr, token).await?;
    let resp = client
        .undrain_channel(pb::UndrainChannelRequest {
            name: name.to_owned(),
        })
        .await
        .map_err(explain)?
        .into_inner();
    Ok(format!(
        "undrained {name}\n{}",
        resp.channel
            .as_ref()
            .map(format_channel)
            .unwrap_or_default()
    ))
}

fn mode_text(mode: i32, channel: &str, weights: &[pb::ChannelWeight]) -> String {
    match pb::RoutingMode::try_from(mode) {
        Ok(pb::RoutingMode::Auto) => "auto".to_owned(),
        Ok(pb::RoutingMode::ForcePrimary) => "force_primary".to_owned(),
        Ok(pb::RoutingMode::ForceAlternative) => "force_alternative".to_owned(),
        Ok(pb::RoutingMode::NamedChannel) => format!("channel:{channel}"),
        Ok(pb::RoutingMode::Weighted) => {
            let split: Vec<String> = weights
                .iter()
                .map(|w| format!("{}={}", w.channel, w.weight))
                .collect();
            format!("weighted:{}", split.join(","))
        }
        _ => format!("unknown ({mode})"),
    }
}

fn circuit_text(state: i32) -> &'static str {
    match pb::CircuitState::try_from(state) {
        Ok(pb::CircuitState::Closed) => "closed",
        Ok(pb::CircuitState::Open) => "open",
        Ok(pb::CircuitState::HalfOpen) => "half_open",
        _ => "unknown",
    }
}

const HEADER: &str = "NAME                 PRIO  DRAINED  CIRCUIT    FAILS  STARTED  FAILOVERS  CONTINGENCY  LAST_VENDOR      LAST_ERROR  BASE_URL";

fn format_channel(c: &pb::ChannelStatus) -> String {
    format!(
        "{:<20} {:>4}  {:<7}  {:<9}  {:>5}  {:>7}  {:>9}  {:>11}  {:<15}  {:<10}  {}\n",
        c.name,
        c.priority,
        if c.drained { "yes" } else { "no" },
        circuit_text(c.circuit_state),
        c.consecutive_failures,
        c.sessions_started,
        c.failovers,
        format!(
            "{}{}",
            c.contingency_answers,
            if c.last_contingency { "*" } else { "" }
        ),
        if c.last_vendor.is_empty() {
            "-"
        } else {
            &c.last_vendor
        },
        if c.last_error_class.is_empty() {
            "-"
        } else {
            &c.last_error_class
        },
        c.base_url,
    )
}

/// The text of `idgate channels list`.
pub fn format_list(resp: &pb::ListChannelsResponse) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "routing mode: {}{}",
        mode_text(resp.mode, &resp.mode_channel, &resp.weights),
        if resp.fleet_control {
            " (mode and drains shared by the fleet)"
        } else {
            ""
        }
    );
    let _ = writeln!(out, "{HEADER}");
    for c in &resp.channels {
        out.push_str(&format_channel(c));
    }
    let _ = writeln!(
        out,
        "(CONTINGENCY: answers with isContingency; * = the last answer was one)"
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_read_as_code_reason_and_message() {
        let e = CliError::Refused {
            code: Code::Unauthenticated,
            reason: Some("ADMIN_TOKEN_INVALID".into()),
            message: "bad token".into(),
            violations: Vec::new(),
        };
        assert_eq!(
            e.to_string(),
            "Unauthenticated [ADMIN_TOKEN_INVALID]: bad token"
        );
        let e = CliError::Refused {
            code: Code::Unavailable,
            reason: None,
            message: "down".into(),
            violations: Vec::new(),
        };
        assert_eq!(e.to_string(), "Unavailable: down");
    }

    #[test]
    fn refusals_print_every_violation_in_full() {
        let status =
            crate::Error::invalid("weights", "must add up to 100").into_status_at("weights");
        let e = explain(status);
        assert_eq!(
            e.to_string(),
            "InvalidArgument [INVALID_REQUEST]: invalid request: weights\n  weights: must add up to 100"
        );
        let e = explain(crate::Error::ProbeNotConfigured.into());
        assert!(
            e.to_string()
                .ends_with("\n  [probe] persons: no probe persons are configured"),
            "{e}"
        );
    }

    #[test]
    fn the_listing_names_mode_channels_and_state() {
        let resp = pb::ListChannelsResponse {
            mode: pb::RoutingMode::NamedChannel as i32,
            mode_channel: "alt".into(),
            channels: vec![pb::ChannelStatus {
                name: "alt".into(),
                base_url: "http://alt".into(),
                priority: 1,
                drained: true,
                circuit_state: pb::CircuitState::Open as i32,
                last_error_class: "timeout".into(),
                contingency_answers: 2,
                last_contingency: true,
                ..Default::default()
            }],
            fleet_control: true,
            weights: Vec::new(),
        };
        let text = format_list(&resp);
        assert!(text.contains("shared by the fleet"), "{text}");
        assert!(text.contains("routing mode: channel:alt"), "{text}");
        let row = text.lines().find(|l| l.starts_with("alt")).unwrap();
        for want in ["yes", "open", "2*", "timeout", "http://alt"] {
            assert!(row.contains(want), "{want} in {row}");
        }
    }
}
