//! Between the router's types and the proto: routing modes (named,
//! weighted), channel states, and the refusals of the admin handlers,
//! naming the request field at fault.

use tonic::Status;

use crate::{
    Error,
    channels::{ChannelSnapshot, CircuitState, RoutingMode, SplitError, WeightedSplit, valid_name},
    proto::v1 as pb,
};

/// The proto form of a mode: `(mode, mode_channel)`; the weights of a
/// weighted mode are [`mode_weights`].
pub fn mode_to_proto(mode: &RoutingMode) -> (pb::RoutingMode, String) {
    match mode {
        RoutingMode::Auto => (pb::RoutingMode::Auto, String::new()),
        RoutingMode::ForcePrimary => (pb::RoutingMode::ForcePrimary, String::new()),
        RoutingMode::ForceAlternative => (pb::RoutingMode::ForceAlternative, String::new()),
        RoutingMode::Channel(n) => (pb::RoutingMode::NamedChannel, n.clone()),
        RoutingMode::Weighted(_) => (pb::RoutingMode::Weighted, String::new()),
    }
}

/// The split of a weighted mode, in the order given; empty for the others.
pub fn mode_weights(mode: &RoutingMode) -> Vec<pb::ChannelWeight> {
    match mode {
        RoutingMode::Weighted(split) => split
            .entries()
            .iter()
            .map(|(channel, weight)| pb::ChannelWeight {
                channel: channel.clone(),
                weight: *weight,
            })
            .collect(),
        _ => Vec::new(),
    }
}

pub(super) fn mode_from_proto(
    mode: i32,
    channel: &str,
    weights: &[pb::ChannelWeight],
) -> Result<RoutingMode, Error> {
    let mode = pb::RoutingMode::try_from(mode).unwrap_or(pb::RoutingMode::Unspecified);
    let named = matches!(mode, pb::RoutingMode::NamedChannel);
    if !named && !channel.is_empty() {
        return Err(Error::invalid(
            "channel",
            "only allowed with ROUTING_MODE_NAMED_CHANNEL",
        ));
    }
    let weighted = matches!(mode, pb::RoutingMode::Weighted);
    if !weighted && !weights.is_empty() {
        return Err(Error::invalid(
            "weights",
            "only allowed with ROUTING_MODE_WEIGHTED",
        ));
    }
    match mode {
        pb::RoutingMode::Unspecified => Err(Error::invalid(
            "mode",
            "must be AUTO, FORCE_PRIMARY, FORCE_ALTERNATIVE, NAMED_CHANNEL or WEIGHTED",
        )),
        pb::RoutingMode::Auto => Ok(RoutingMode::Auto),
        pb::RoutingMode::ForcePrimary => Ok(RoutingMode::ForcePrimary),
        pb::RoutingMode::ForceAlternative => Ok(RoutingMode::ForceAlternative),
        pb::RoutingMode::NamedChannel if channel.is_empty() => Err(Error::invalid(
            "channel",
            "required with ROUTING_MODE_NAMED_CHANNEL",
        )),
        pb::RoutingMode::NamedChannel => Ok(RoutingMode::Channel(channel.to_owned())),
        pb::RoutingMode::Weighted => weighted_from_proto(weights),
    }
}

/// A weighted split from its proto form. Refusals name the entry's field
/// (`weights[2].weight`) and quote a channel only when well formed.
fn weighted_from_proto(weights: &[pb::ChannelWeight]) -> Result<RoutingMode, Error> {
    let entries = weights
        .iter()
        .map(|w| (w.channel.clone(), w.weight))
        .collect();
    let at = |name: &str, leaf: &str| {
        weights
            .iter()
            .position(|w| w.channel == name)
            .map_or_else(|| "weights".to_owned(), |i| format!("weights[{i}].{leaf}"))
    };
    WeightedSplit::new(entries)
        .map(RoutingMode::Weighted)
        .map_err(|e| {
            let field = match &e {
                SplitError::Empty => "weights".to_owned(),
                SplitError::TooManyChannels | SplitError::ZeroTotal => "weights".to_owned(),
                SplitError::Malformed { index } | SplitError::BadName { index } => {
                    format!("weights[{index}].channel")
                }
                SplitError::Duplicate(name) => {
                    // The second occurrence is the offending one.
                    let first = weights.iter().position(|w| &w.channel == name);
                    let second = weights
                        .iter()
                        .enumerate()
                        .skip(first.map_or(0, |i| i + 1))
                        .find(|(_, w)| &w.channel == name)
                        .map(|(i, _)| i);
                    second.map_or_else(|| "weights".to_owned(), |i| format!("weights[{i}].channel"))
                }
                SplitError::BadWeight(name) => at(name, "weight"),
            };
            Error::invalid(field, e.to_string())
        })
}

/// The field a mode's unknown channel is reported under.
pub(super) fn mode_field(mode: &RoutingMode, channel: &str) -> String {
    match mode {
        RoutingMode::Weighted(split) => split
            .names()
            .position(|n| n == channel)
            .map_or_else(|| "weights".to_owned(), |i| format!("weights[{i}].channel")),
        _ => "channel".to_owned(),
    }
}

/// A refusal reported against the request field `field` (its details are
/// built with every other error's, in `error`). An unknown channel's name
/// is echoed only when it is a well-formed channel name.
pub(super) fn to_status(field: &str, err: Error) -> Status {
    match err {
        Error::ChannelUnknown(name) if !valid_name(&name) => {
            Error::ChannelUnknown("<invalid name>".to_owned()).into_status_at(field)
        }
        other => other.into_status_at(field),
    }
}

/// The proto form of a channel snapshot.
pub fn channel_status(s: &ChannelSnapshot) -> pb::ChannelStatus {
    let circuit = match s.circuit {
        CircuitState::Closed => pb::CircuitState::Closed,
        CircuitState::Open => pb::CircuitState::Open,
        CircuitState::HalfOpen => pb::CircuitState::HalfOpen,
    };
    pb::ChannelStatus {
        name: s.name.clone(),
        base_url: s.base_url.clone(),
        priority: s.priority,
        drained: s.drained,
        circuit_state: circuit as i32,
        last_error_class: s.last_error_class.to_owned(),
        sessions_started: s.sessions_started,
        failovers: s.failovers,
        contingency_answers: s.contingency_answers,
        last_vendor: s.last_vendor.clone(),
        last_contingency: s.last_contingency,
        consecutive_failures: s.consecutive_failures,
    }
}

pub(super) fn name_arg(name: &str) -> Result<&str, Error> {
    if name.is_empty() {
        return Err(Error::invalid("name", "required"));
    }
    Ok(name)
}
